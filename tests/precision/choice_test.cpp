// The precision a run really uses: `auto` by what the device computes natively, and an explicit
// request kept, replaced or warned about by the same rule, on CPUs with and without bf16 and fp16
// instructions (given here, not this machine's) and GPUs of each capability.
#include "ampt/precision/choice.h"

#include <catch2/catch.hpp>

using ampt::config::MixedPrecision;
using ampt::device::CpuFeatures;
using ampt::precision::auto_gpu_precision;
using ampt::precision::choose_precision;

namespace {

const c10::Device kCpu(c10::kCPU);

CpuFeatures epyc() {
  CpuFeatures cpu;
  cpu.model = "AMD EPYC 7B13";
  cpu.avx2 = cpu.f16c = true;
  return cpu;
}

CpuFeatures sapphire_rapids() {
  CpuFeatures cpu;
  cpu.model = "Intel(R) Xeon(R) Platinum 8480+";
  cpu.avx2 = cpu.avx512f = cpu.amx_bf16 = cpu.avx512_fp16 = true;
  return cpu;
}

}  // namespace

TEST_CASE("precision choice: auto on a CPU is bf16 only with native bf16, else fp32, and says why",
          "[precision][auto]") {
  const auto without = choose_precision(MixedPrecision::auto_select, false, kCpu, epyc());
  CHECK(without.precision == MixedPrecision::no);
  CHECK(without.reason == "auto: this CPU (AMD EPYC 7B13) has no native bf16 (avx512_bf16 or "
                          "amx_bf16), where bf16 runs slower than fp32, so fp32");
  CHECK(without.warning.empty());
  const auto with = choose_precision(MixedPrecision::auto_select, false, kCpu, sapphire_rapids());
  CHECK(with.precision == MixedPrecision::bf16);
  CHECK(with.reason ==
        "auto: this CPU (Intel(R) Xeon(R) Platinum 8480+) has native bf16 (avx512_bf16 or amx_bf16)");
  CHECK_FALSE(with.fell_back);
}

TEST_CASE("precision choice: an explicit bf16 or fp16 on a CPU without it is kept, with a warning",
          "[precision][auto]") {
  for (const bool strict : {false, true}) {
    const auto bf16 = choose_precision(MixedPrecision::bf16, strict, kCpu, epyc());
    CHECK(bf16.precision == MixedPrecision::bf16);
    CHECK_FALSE(bf16.fell_back);
    CHECK(bf16.warning ==
          "this CPU (AMD EPYC 7B13) has no native bf16 (avx512_bf16 or amx_bf16): ATen converts "
          "every bf16 value to fp32 and back, so this run is several times slower than fp32 here "
          "(--mixed_precision auto picks fp32 on it)");
    const auto fp16 = choose_precision(MixedPrecision::fp16, strict, kCpu, epyc());
    CHECK(fp16.precision == MixedPrecision::fp16);
    CHECK_THAT(fp16.warning, Catch::Contains("no native fp16 (avx512_fp16 or amx_fp16)"));
    // With the instructions: no warning.
    for (const auto requested : {MixedPrecision::bf16, MixedPrecision::fp16, MixedPrecision::no}) {
      const auto choice = choose_precision(requested, strict, kCpu, sapphire_rapids());
      CHECK(choice.precision == requested);
      CHECK(choice.warning.empty());
      CHECK(choice.reason.empty());
    }
    CHECK(choose_precision(MixedPrecision::no, strict, kCpu, epyc()).warning.empty());
  }
}

TEST_CASE("precision choice: fp8 on a CPU is an error", "[precision][auto]") {
  CHECK_THROWS_WITH(choose_precision(MixedPrecision::fp8, false, kCpu, sapphire_rapids()),
                    Catch::Contains("mixed_precision fp8 needs a CUDA GPU of compute capability 8.9"));
}

TEST_CASE("precision choice: auto on a GPU is bf16 from Ampere on, fp16 with the scaler before",
          "[precision][auto]") {
  const auto turing = auto_gpu_precision(75);
  CHECK(turing.precision == MixedPrecision::fp16);
  CHECK(turing.reason == "auto: the GPU (compute capability 7.5) has no bf16, so fp16 with the "
                         "loss scaler");
  for (const int capability : {80, 86, 89, 90, 120}) {
    CHECK(auto_gpu_precision(capability).precision == MixedPrecision::bf16);
  }
  CHECK(auto_gpu_precision(86).reason == "auto: the GPU (compute capability 8.6) has bf16");
}

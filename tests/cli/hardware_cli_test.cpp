// What ampt makes of the machine it meets, through the binary: `ampt doctor`'s report and exit
// status, and the default precision on this CPU: fp32 where it has no native bf16 (most
// laptops, AVX2 servers), said in the startup block, and one warning for an explicit bf16 there.
#include "support/process.h"

#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <string>

using ampt::test::make_temp_dir;
using ampt::test::run_ampt;

namespace {

// Whether this CPU lists `one` or `other`, read here independently of ampt's reader.
bool has_flag(const std::string& one, const std::string& other) {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (!line.starts_with("flags")) continue;
    std::istringstream flags(line);
    for (std::string flag; flags >> flag;) {
      if (flag == one || flag == other) return true;
    }
    return false;
  }
  return false;
}

bool native_bf16() { return has_flag("avx512_bf16", "amx_bf16"); }
bool native_fp16() { return has_flag("avx512_fp16", "amx_fp16"); }

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("cli doctor: versions, the CPU's bf16 and fp16, no GPU, and a machine that can train",
          "[cli][doctor]") {
  const auto r = run_ampt({"doctor"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::StartsWith("ampt 0.1.0 (git "));
  CHECK_THAT(r.out, Catch::Contains("LibTorch 2.11.0, CUDA runtime 13.0") &&
                        Catch::Contains(", NCCL 2.") && Catch::Contains(", cuDNN 9."));
  CHECK_THAT(r.out, Catch::Contains("allocators: malloc tcmalloc, CUDA "));
  CHECK_THAT(r.out, Catch::Contains("kernels built for: sm_75, sm_80, sm_86, sm_89, sm_90, sm_100, "
                                    "sm_120 binaries and compute_120 PTX; the fp8 kernels for "
                                    "sm_89, sm_90, sm_100, sm_120"));
  CHECK_THAT(r.out, Catch::Contains("\nCPU: "));
  CHECK_THAT(r.out, Catch::Contains("\nGPU: none visible\n"));
  const std::string bf16 = ", bf16", fp16 = ", fp16";
  CHECK_THAT(r.out, Catch::Contains(
                        "  base_dtype (a LoRA base's storage): auto" + (native_bf16() ? bf16 : "") +
                        (native_fp16() ? fp16 : "") + " at full speed; nf4, int8, fp8" +
                        (native_bf16() ? "" : bf16) + (native_fp16() ? "" : fp16) +
                        " in less memory, each weight dequantized by ATen ops before its GEMM, "
                        "slower\n"));
  if (native_bf16()) {
    CHECK_THAT(r.out, Catch::Contains("  bf16: native\n"));
    CHECK_THAT(r.out, Catch::Contains("  mixed_precision auto: bf16 (auto: this CPU"));
    CHECK_THAT(r.out, Catch::EndsWith("\ncan train: yes; by default `ampt train` runs on cpu in bf16\n"));
  } else {
    CHECK_THAT(r.out, Catch::Contains("  bf16: emulated (no avx512_bf16 or amx_bf16): slower than "
                                      "fp32 here\n"));
    CHECK_THAT(r.out, Catch::Contains("  mixed_precision auto: fp32 (auto: this CPU"));
    CHECK_THAT(r.out, Catch::EndsWith("\ncan train: yes; by default `ampt train` runs on cpu in fp32\n"));
  }
  const auto bad = run_ampt({"doctor", "--gpu"});
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Catch::StartsWith("ampt: error: unknown flag '--gpu'"));
}

TEST_CASE("cli train: the default precision fits this CPU and says why, and an explicit bf16 where it "
          "is emulated warns once",
          "[cli][train][auto]") {
  const auto dir = make_temp_dir();
  const auto r = run_ampt({"train", "--max_steps", "3", "--output_dir", dir});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("(mixed_precision from default)"));
  if (native_bf16()) {
    CHECK_THAT(r.out, Catch::Contains("[AMP] Using BF16 mixed precision"));
  } else {
    CHECK_THAT(r.out, Catch::Contains("[AMP] Using FP32 precision"));
    CHECK_THAT(r.out, Catch::Contains("[AMP] auto: this CPU") &&
                          Catch::Contains("has no native bf16 (avx512_bf16 or amx_bf16), where bf16 "
                                          "runs slower than fp32, so fp32"));
  }
  const auto explicit_bf16 =
      run_ampt({"train", "--mixed_precision", "bf16", "--max_steps", "3", "--output_dir", dir + "/b"});
  INFO(explicit_bf16.out << explicit_bf16.err);
  REQUIRE(explicit_bf16.exit_code == 0);
  const std::string warning = "has no native bf16 (avx512_bf16 or amx_bf16): ATen converts every "
                              "bf16 value to fp32 and back";
  CHECK(count(explicit_bf16.out + explicit_bf16.err, warning) == (native_bf16() ? 0u : 1u));
}

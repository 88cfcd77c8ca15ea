// The CPU's bf16 and fp16 instructions, read from /proc/cpuinfo's text: what decides whether
// `--mixed_precision auto` trains in bf16 on a CPU and whether an explicit bf16 or fp16 warns.
#include "ampt/device/cpu_features.h"

#include <catch2/catch.hpp>

#include <sstream>
#include <string>

using ampt::device::parse_cpuinfo;

namespace {

ampt::device::CpuFeatures parse(const std::string& text) {
  std::istringstream in(text);
  return parse_cpuinfo(in);
}

}  // namespace

TEST_CASE("cpu features: an AVX2-only EPYC has neither native bf16 nor fp16", "[device][cpu]") {
  const auto cpu = parse(
      "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\n"
      "flags\t\t: fpu vme sse sse2 avx f16c avx2 fma bmi2\n\n"
      "processor\t: 1\nmodel name\t: AMD EPYC 7B13\nflags\t\t: fpu avx512_bf16\n");
  CHECK(cpu.model == "AMD EPYC 7B13");
  CHECK(cpu.avx2);
  CHECK(cpu.f16c);
  CHECK_FALSE(cpu.avx512f);
  // Only the first processor's flags count: every core lists the same.
  CHECK_FALSE(cpu.native_bf16());
  CHECK_FALSE(cpu.native_fp16());
  CHECK(cpu.flags() == std::vector<std::string>{"avx2", "f16c"});
}

TEST_CASE("cpu features: AVX-512 BF16 (Cooper Lake, Zen 4) and AMX (Sapphire Rapids)",
          "[device][cpu]") {
  const auto zen4 = parse("model name\t: AMD EPYC 9654\nflags\t\t: avx2 avx512f avx512_bf16\n");
  CHECK(zen4.native_bf16());
  CHECK_FALSE(zen4.native_fp16());
  const auto spr = parse(
      "model name\t: Intel(R) Xeon(R) Platinum 8480+\n"
      "flags\t\t: avx2 avx512f avx512_fp16 amx_bf16 amx_tile amx_int8\n");
  CHECK(spr.native_bf16());
  CHECK(spr.native_fp16());
  CHECK(spr.flags() == std::vector<std::string>{"avx2", "avx512f", "amx_bf16", "avx512_fp16"});
}

TEST_CASE("cpu features: a cpuinfo without flags or model (another architecture) has none",
          "[device][cpu]") {
  const auto cpu = parse("processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd\n");
  CHECK(cpu.model.empty());
  CHECK(cpu.flags().empty());
}

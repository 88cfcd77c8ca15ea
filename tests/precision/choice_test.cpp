#include "ampt/precision/choice.h"

#include <catch2/catch.hpp>

using ampt::config::MixedPrecision;
using ampt::precision::choose_precision;
using ampt::precision::cpu_has_native_bf16;

TEST_CASE("precision choice: auto on a CPU is bf16 only with native bf16, else fp32", "[precision][auto]") {
  const c10::Device cpu(c10::kCPU);
  const auto choice = choose_precision(MixedPrecision::auto_select, false, cpu);
  if (cpu_has_native_bf16()) {
    CHECK(choice.precision == MixedPrecision::bf16);
    CHECK(choice.reason == "auto: this CPU has native bf16 (avx512_bf16 or amx_bf16)");
  } else {
    CHECK(choice.precision == MixedPrecision::no);
    CHECK(choice.reason == "auto: this CPU has no native bf16 (avx512_bf16 or amx_bf16), so fp32");
  }
  CHECK_FALSE(choice.fell_back);
}

TEST_CASE("precision choice: an explicit request on a CPU is kept as it is", "[precision][auto]") {
  const c10::Device cpu(c10::kCPU);
  for (auto requested : {MixedPrecision::no, MixedPrecision::fp16, MixedPrecision::bf16}) {
    for (bool strict : {false, true}) {
      const auto choice = choose_precision(requested, strict, cpu);
      CHECK(choice.precision == requested);
      CHECK(choice.reason.empty());
      CHECK_FALSE(choice.fell_back);
    }
  }
}

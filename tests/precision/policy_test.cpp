#include "ampt/precision/policy.h"

#include <catch2/catch.hpp>

using ampt::config::MixedPrecision;
using ampt::config::OptLevel;
using ampt::precision::make_policy;

TEST_CASE("precision policy: O1 maps each precision to autocast dtype and scaler", "[precision][policy]") {
  const auto bf16 = make_policy(MixedPrecision::bf16, OptLevel::O1);
  CHECK(bf16.autocast);
  CHECK(bf16.compute_dtype == c10::kBFloat16);
  CHECK_FALSE(bf16.loss_scaling);
  CHECK(bf16.name() == "BF16");

  const auto fp16 = make_policy(MixedPrecision::fp16, OptLevel::O1);
  CHECK(fp16.autocast);
  CHECK(fp16.compute_dtype == c10::kHalf);
  CHECK(fp16.loss_scaling);
  CHECK(fp16.name() == "FP16");

  const auto fp32 = make_policy(MixedPrecision::no, OptLevel::O1);
  CHECK_FALSE(fp32.autocast);
  CHECK_FALSE(fp32.loss_scaling);
  CHECK(fp32.name() == "FP32");
}

TEST_CASE("precision policy: O0 is fp32 whatever was requested", "[precision][policy]") {
  for (auto requested : {MixedPrecision::no, MixedPrecision::bf16, MixedPrecision::fp16}) {
    const auto policy = make_policy(requested, OptLevel::O0);
    CHECK_FALSE(policy.autocast);
    CHECK_FALSE(policy.loss_scaling);
    CHECK(policy.name() == "FP32");
    CHECK_THAT(policy.explanation(), Catch::StartsWith("fp32 everywhere"));
  }
}

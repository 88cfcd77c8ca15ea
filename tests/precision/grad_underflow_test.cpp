// The underflow statistic against hand-computed fp16 and bf16 limits.
#include "ampt/precision/grad_underflow.h"

#include <catch2/catch.hpp>
#include <torch/torch.h>

using ampt::precision::underflow_counts;

TEST_CASE("grad underflow: counts non-zero fp32 values that round to zero in the half dtype", "[precision][health]") {
  // fp16's smallest subnormal is 2^-24 (5.96e-8): 1e-8 and 2.9e-8 (< 2^-25) round to 0, 3.1e-8
  // rounds up to 2^-24. bf16's is 2^-133 (9.2e-41): only 1e-42 (< 2^-134) rounds to 0.
  const auto a = torch::tensor({0.0F, 1e-30F, 1e-3F, 1e-8F, 2.9e-8F, 3.1e-8F, -1e-42F});
  const auto b = torch::tensor({0.0F, 5.0F, std::numeric_limits<float>::infinity()});
  auto half = underflow_counts({a, b}, torch::kHalf);
  CHECK(half[0].item<double>() == 4.0);  // 1e-30, 1e-8, 2.9e-8, -1e-42
  CHECK(half[1].item<double>() == 8.0);  // non-zero: 6 in a, 2 in b (inf counts, never underflows)
  auto bf16 = underflow_counts({a, b}, torch::kBFloat16);
  CHECK(bf16[0].item<double>() == 1.0);
  CHECK(bf16[1].item<double>() == 8.0);
}

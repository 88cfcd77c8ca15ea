#include "ampt/precision/autocast_guard.h"

#include <catch2/catch.hpp>
#include <torch/torch.h>

using ampt::precision::AutocastGuard;

TEST_CASE("autocast guard: matmuls run in the low dtype inside, fp32 outside", "[precision][autocast]") {
  const auto a = torch::randn({8, 8});
  {
    AutocastGuard guard(torch::kCPU, torch::kBFloat16, true);
    CHECK(at::autocast::is_autocast_enabled(torch::kCPU));
    CHECK(torch::mm(a, a).scalar_type() == torch::kBFloat16);
    // Ops that need range stay fp32 under autocast (CPU's list has the losses).
    const auto targets = torch::zeros({8}, torch::kInt64);
    CHECK(torch::nn::functional::cross_entropy(torch::mm(a, a), targets).scalar_type() ==
          torch::kFloat32);
  }
  CHECK_FALSE(at::autocast::is_autocast_enabled(torch::kCPU));
  CHECK(torch::mm(a, a).scalar_type() == torch::kFloat32);
}

TEST_CASE("autocast guard: nested guards restore the enclosing state", "[precision][autocast]") {
  const auto a = torch::randn({4, 4});
  AutocastGuard outer(torch::kCPU, torch::kHalf, true);
  {
    AutocastGuard inner(torch::kCPU, torch::kBFloat16, false);
    CHECK_FALSE(at::autocast::is_autocast_enabled(torch::kCPU));
    CHECK(torch::mm(a, a).scalar_type() == torch::kFloat32);
  }
  CHECK(at::autocast::is_autocast_enabled(torch::kCPU));
  CHECK(at::autocast::get_autocast_dtype(torch::kCPU) == torch::kHalf);
  CHECK(torch::mm(a, a).scalar_type() == torch::kHalf);
}

TEST_CASE("autocast guard: closing the outermost guard drops cached weight casts", "[precision][autocast]") {
  auto weight = torch::ones({2, 2}, torch::requires_grad());
  const auto x = torch::ones({2, 2});
  {
    AutocastGuard guard(torch::kCPU, torch::kBFloat16, true);
    CHECK(torch::mm(x, weight).sum().item<float>() == 8.0F);
  }
  // An optimizer step changes the weight in place; a stale cached bf16 copy would still say 8.
  {
    torch::NoGradGuard no_grad;
    weight.mul_(2.0);
  }
  AutocastGuard guard(torch::kCPU, torch::kBFloat16, true);
  CHECK(torch::mm(x, weight).sum().item<float>() == 16.0F);
}

TEST_CASE("autocast guard: the cache switch decides whether weight casts are reused", "[precision][autocast]") {
  auto weight = torch::ones({2, 2}, torch::requires_grad());
  const auto x = torch::ones({2, 2});
  for (const bool cache : {true, false}) {
    INFO("cache " << cache);
    torch::NoGradGuard no_grad;  // the in-place change below is fine on a leaf without autograd
    weight.fill_(1.0);
    AutocastGuard guard(torch::kCPU, torch::kBFloat16, true, cache);
    CHECK(at::autocast::is_autocast_cache_enabled() == cache);
    CHECK(torch::mm(x, weight).sum().item<float>() == 8.0F);
    weight.mul_(2.0);
    // With the cache the second matmul reuses the bf16 copy made by the first.
    CHECK(torch::mm(x, weight).sum().item<float>() == (cache ? 8.0F : 16.0F));
  }
  CHECK(at::autocast::is_autocast_cache_enabled());  // restored
}

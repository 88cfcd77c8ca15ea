#include "ampt/train/grad_clip.h"

#include <catch2/catch.hpp>
#include <torch/torch.h>

TEST_CASE("grad clipping equals torch::nn::utils::clip_grad_norm_", "[train][clip]") {
  torch::manual_seed(3);
  for (double max_norm : {0.5, 1000.0}) {
    auto a = torch::randn({7, 3}, torch::requires_grad());
    auto b = torch::randn({5}, torch::requires_grad());
    a.mutable_grad() = torch::randn({7, 3}) * 4;
    b.mutable_grad() = torch::randn({5}) * 4;
    auto ra = a.detach().clone().requires_grad_();
    auto rb = b.detach().clone().requires_grad_();
    ra.mutable_grad() = a.grad().clone();
    rb.mutable_grad() = b.grad().clone();

    const auto norm = ampt::train::clip_grad_norm_({a.grad(), b.grad()}, max_norm);
    const double ref_norm = torch::nn::utils::clip_grad_norm_(std::vector<torch::Tensor>{ra, rb}, max_norm);
    CHECK(norm.item<double>() == Approx(ref_norm).epsilon(1e-6));
    CHECK(torch::allclose(a.grad(), ra.grad(), 1e-6, 1e-6));
    CHECK(torch::allclose(b.grad(), rb.grad(), 1e-6, 1e-6));
  }
}

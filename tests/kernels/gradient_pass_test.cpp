// The step's passes over every gradient on the CPU, one operation each: the norms ATen's foreach
// norm gives, the same at any thread count, inf and NaN kept; the clip's scaling as ATen's
// multiplication, to the bit.
#include "ampt/kernels/gradient_pass.h"

#include <ATen/Parallel.h>
#include <ATen/ops/_foreach_norm.h>
#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <cmath>
#include <limits>

namespace {

// Sizes around the lanes (32), one chunk (65536) and the threads' threshold (262144), and none.
std::vector<torch::Tensor> mixed_gradients() {
  std::vector<torch::Tensor> grads;
  for (const int64_t n : {0, 1, 31, 33, 4096, 65537, 300000}) grads.push_back(torch::randn({n}) * 3);
  grads.push_back(torch::randn({64, 256}));
  return grads;
}

torch::Tensor aten_norms(const std::vector<torch::Tensor>& grads) {
  return torch::stack(at::_foreach_norm(grads, 2));
}

}  // namespace

TEST_CASE("gradient pass: each gradient's norm as ATen's, the same at any thread count",
          "[kernels][gradient_pass]") {
  torch::manual_seed(4);
  const auto grads = mixed_gradients();
  REQUIRE(ampt::kernels::cpu_gradient_pass(grads));
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  const auto one = ampt::kernels::gradient_norms(grads);
  at::set_num_threads(2);
  const auto two = ampt::kernels::gradient_norms(grads);
  at::set_num_threads(threads);
  CHECK(one.scalar_type() == torch::kFloat32);
  CHECK(torch::equal(one, two));
  // Against the float64 norm: ATen's float32 norm is 1.4e-6 from it at 300000 elements (its
  // sums run longer), this pass's 8e-8 (chunks of 65536 in 32 lanes), on AVX-512 and AVX2 alike.
  std::vector<torch::Tensor> exact;
  for (const auto& g : grads) exact.push_back(g.to(torch::kDouble).norm());
  CHECK(torch::allclose(one.to(torch::kDouble), torch::stack(exact), 5e-7, 0.0));
  CHECK(torch::allclose(one, aten_norms(grads), 3e-6, 0.0));
  CHECK(one[0].item<float>() == 0.0F);
}

TEST_CASE("gradient pass: inf, NaN and squares beyond float32 make a norm non-finite, as ATen's",
          "[kernels][gradient_pass]") {
  torch::manual_seed(5);
  auto grads = mixed_gradients();
  grads[2][7] = std::numeric_limits<float>::infinity();
  grads[5][65536] = std::nanf("");  // the second chunk
  grads[7][3][9] = 1e20F;           // finite, its square is not
  const auto norms = ampt::kernels::gradient_norms(grads);
  const auto aten = aten_norms(grads);
  for (const int64_t i : {2, 5, 7}) {
    INFO("gradient " << i);
    CHECK(std::isinf(norms[i].item<float>()) == std::isinf(aten[i].item<float>()));
    CHECK(std::isnan(norms[i].item<float>()) == std::isnan(aten[i].item<float>()));
    CHECK_FALSE(std::isfinite(norms[i].item<float>()));
  }
  CHECK(torch::isfinite(norms.index({torch::tensor({0, 1, 3, 4, 6})})).all().item<bool>());
}

TEST_CASE("gradient pass: the clip's scaling equals ATen's multiplication to the bit",
          "[kernels][gradient_pass]") {
  torch::manual_seed(6);
  auto grads = mixed_gradients();
  std::vector<torch::Tensor> expected;
  const auto coefficient = torch::tensor(0.37F);
  for (const auto& g : grads) expected.push_back(g * coefficient);
  ampt::kernels::scale_gradients_(grads, coefficient);
  for (size_t i = 0; i < grads.size(); ++i) CHECK(torch::equal(grads[i], expected[i]));
}

TEST_CASE("gradient pass: strided or half gradients take ATen's foreach operations",
          "[kernels][gradient_pass]") {
  torch::manual_seed(7);
  auto strided = torch::randn({8, 5}).t();
  auto half = torch::randn({6}).to(torch::kBFloat16);
  for (const auto& grads : {std::vector<torch::Tensor>{strided}, std::vector<torch::Tensor>{half}}) {
    CHECK_FALSE(ampt::kernels::cpu_gradient_pass(grads));
    CHECK(torch::allclose(ampt::kernels::gradient_norms(grads), aten_norms(grads).to(torch::kFloat32)));
    const auto before = grads.front().clone();
    ampt::kernels::scale_gradients_(grads, torch::tensor(0.5F));
    CHECK(torch::equal(grads.front(), before * 0.5));
  }
  CHECK_FALSE(ampt::kernels::cpu_gradient_pass({}));
}

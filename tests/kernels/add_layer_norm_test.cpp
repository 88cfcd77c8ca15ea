// The residual add fused with the LayerNorm after it: the sum and the normalisation computed by
// hand in float64, the dtypes the next matmul and the residual stream expect, and on a GPU the
// CUDA kernels against the unfused ATen computation, forward and backward, in every layout.
#include "ampt/kernels/add_layer_norm.h"

#include "ampt/precision/autocast_guard.h"
#include "support/skip.h"

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <string>

using ampt::kernels::add_layer_norm;
using ampt::kernels::add_layer_norm_reference;
using ampt::kernels::AddLayerNormResult;

namespace {

struct Inputs {
  torch::Tensor residual, branch, weight, bias;
};

Inputs make_inputs(const torch::Device& device, c10::ScalarType stream, c10::ScalarType branch,
                   int64_t cols) {
  torch::manual_seed(17);
  const auto on = torch::TensorOptions().device(device);
  // An offset and a spread per row, so the mean and variance both matter.
  return {(torch::randn({3, 5, cols}, on) * 2 + 0.5).to(stream).requires_grad_(true),
          torch::randn({3, 5, cols}, on).to(branch).requires_grad_(true),
          // The stream's dtype: a wholly half model has half LayerNorm weights, and ATen's CUDA
          // layer_norm (the reference) refuses fp32 weights with a half input.
          (1 + 0.3 * torch::randn({cols}, on)).to(stream).requires_grad_(true),
          (0.1 * torch::randn({cols}, on)).to(stream).requires_grad_(true)};
}

struct Run {
  torch::Tensor sum, normed, d_residual, d_branch, d_weight, d_bias;
};

// Both outputs used, as in a transformer block: the sum goes on down the stream, the normed
// values into a matmul. `use_sum` false: only the normed values are used.
template <class Fn>
Run run_add_layer_norm(const Inputs& in, Fn&& fn, bool use_sum, c10::DeviceType autocast_device,
        c10::ScalarType half) {
  const auto leaf = [](const torch::Tensor& t) { return t.detach().clone().requires_grad_(true); };
  Inputs mine{leaf(in.residual), leaf(in.branch), leaf(in.weight), leaf(in.bias)};
  AddLayerNormResult out;
  {
    ampt::precision::AutocastGuard autocast(autocast_device,
                                            half == c10::kFloat ? c10::kBFloat16 : half,
                                            /*enabled=*/half != c10::kFloat);
    out = fn(mine.residual, mine.branch, mine.weight, mine.bias, 1e-5);
  }
  torch::manual_seed(23);
  const auto g_normed = torch::randn(out.normed.sizes(), out.normed.options().dtype(torch::kFloat32));
  auto objective = (out.normed.to(torch::kFloat32) * g_normed).sum();
  if (use_sum) {
    const auto g_sum = torch::randn(out.sum.sizes(), out.sum.options().dtype(torch::kFloat32));
    objective = objective + (out.sum.to(torch::kFloat32) * g_sum).sum();
  }
  objective.backward();
  return {out.sum.detach(), out.normed.detach(), mine.residual.grad(), mine.branch.grad(),
          mine.weight.grad(), mine.bias.grad()};
}

void check_dtype_and_close(const torch::Tensor& got, const torch::Tensor& want, double tol,
                 const std::string& what) {
  INFO(what << ": dtype " << got.dtype() << " (want " << want.dtype() << "), max error "
            << (got.to(torch::kFloat64) - want.to(torch::kFloat64)).abs().max().item<double>());
  CHECK(got.dtype() == want.dtype());
  CHECK(torch::allclose(got.to(torch::kFloat64), want.to(torch::kFloat64), tol, tol));
}

void compare_with_reference(const torch::Device& device, c10::ScalarType stream,
                            c10::ScalarType branch, c10::ScalarType half, double tol) {
  for (const int64_t cols : {48, 37, 1600}) {  // a ragged last warp pass; GPT-2 XL's width
    for (const bool use_sum : {true, false}) {
      INFO("width " << cols << (use_sum ? ", sum and normed used" : ", normed only"));
      const auto in = make_inputs(device, stream, branch, cols);
      const auto fused = run_add_layer_norm(in, add_layer_norm, use_sum, device.type(), half);
      const auto reference = run_add_layer_norm(in, add_layer_norm_reference, use_sum, device.type(), half);
      check_dtype_and_close(fused.sum, reference.sum, tol, "sum");
      check_dtype_and_close(fused.normed, reference.normed, tol, "normed");
      check_dtype_and_close(fused.d_residual, reference.d_residual, tol, "d_residual");
      check_dtype_and_close(fused.d_branch, reference.d_branch, tol, "d_branch");
      // Sums over 15 rows of products of rounded values.
      check_dtype_and_close(fused.d_weight, reference.d_weight, 4 * tol, "d_weight");
      check_dtype_and_close(fused.d_bias, reference.d_bias, 4 * tol, "d_bias");
    }
  }
}

}  // namespace

TEST_CASE("add_layer_norm: the sum and its layer norm as computed by hand",
          "[kernels][add_layer_norm]") {
  const auto in = make_inputs(torch::kCPU, torch::kFloat32, torch::kFloat32, 8);
  const auto out = add_layer_norm(in.residual, in.branch, in.weight, in.bias, 1e-5);
  const auto s = in.residual.detach().to(torch::kFloat64) + in.branch.detach().to(torch::kFloat64);
  const auto mean = s.mean(-1, true);
  const auto var = (s - mean).pow(2).mean(-1, true);  // biased, as LayerNorm's
  const auto want = (s - mean) / (var + 1e-5).sqrt() * in.weight.detach().to(torch::kFloat64) +
                    in.bias.detach().to(torch::kFloat64);
  CHECK(torch::allclose(out.sum.to(torch::kFloat64), s, 1e-6, 1e-6));
  CHECK(torch::allclose(out.normed.to(torch::kFloat64), want, 1e-5, 1e-5));
  // Gradients reach all four inputs.
  (out.sum.sum() + out.normed.pow(2).sum()).backward();
  for (const auto& t : {in.residual, in.branch, in.weight, in.bias}) CHECK(t.grad().defined());
}

TEST_CASE("add_layer_norm: under autocast the stream stays fp32 and normed is in autocast's dtype",
          "[kernels][add_layer_norm]") {
  const auto in = make_inputs(torch::kCPU, torch::kFloat32, torch::kBFloat16, 16);
  const auto out = run_add_layer_norm(in, add_layer_norm, true, torch::kCPU, torch::kBFloat16);
  CHECK(out.sum.dtype() == torch::kFloat32);
  CHECK(out.normed.dtype() == torch::kBFloat16);
  CHECK(out.d_residual.dtype() == torch::kFloat32);
  CHECK(out.d_branch.dtype() == torch::kBFloat16);
  CHECK(out.d_weight.dtype() == torch::kFloat32);
  // The normed values are the fp32 layer norm rounded once to bf16, as the matmul's cast would.
  const auto fp32 = run_add_layer_norm(in, add_layer_norm, true, torch::kCPU, torch::kFloat);
  CHECK(torch::equal(out.normed, fp32.normed.to(torch::kBFloat16)));
}

TEST_CASE("add_layer_norm: the CUDA kernels equal the unfused ATen computation on a GPU",
          "[kernels][add_layer_norm][cuda]") {
  if (!torch::cuda::is_available()) {
    AMPT_SKIP(gpu, "no CUDA device: add_layer_norm's CUDA kernels need one");
  }
  const torch::Device gpu(torch::kCUDA, 0);
  {
    // The kernel, not the fallback, ran.
    const auto in = make_inputs(gpu, torch::kFloat32, torch::kFloat32, 32);
    const auto out = add_layer_norm(in.residual, in.branch, in.weight, in.bias, 1e-5);
    REQUIRE(out.normed.grad_fn() != nullptr);
    INFO("grad_fn " << out.normed.grad_fn()->name());
    CHECK(out.normed.grad_fn()->name().find("AddLayerNorm") != std::string::npos);
  }
  SECTION("fp32") { compare_with_reference(gpu, torch::kFloat32, torch::kFloat32, torch::kFloat, 1e-5); }
  SECTION("O1 bf16: fp32 stream, bf16 branch") {
    compare_with_reference(gpu, torch::kFloat32, torch::kBFloat16, torch::kBFloat16, 2e-2);
  }
  SECTION("O1 fp16: fp32 stream, fp16 branch") {
    compare_with_reference(gpu, torch::kFloat32, torch::kHalf, torch::kHalf, 2e-3);
  }
  SECTION("a wholly bf16 model") {
    compare_with_reference(gpu, torch::kBFloat16, torch::kBFloat16, torch::kFloat, 2e-2);
  }
  SECTION("a wholly fp16 model") {
    compare_with_reference(gpu, torch::kHalf, torch::kHalf, torch::kFloat, 2e-3);
  }
}

// The Linear whose weight and bias gradients come from one GEMM: wherever the epilogue does not
// run (a CPU, float32, --gemm_epilogues false) the same values and gradients as at::linear, bit
// for bit, plain and under autocast; on a GPU in half dtypes, the gradients within the half
// dtype's rounding of at::linear's; where a GPT's attention is not one node, its projections use
// it; over O1's half copies, autocast's values and fp32 weight gradients.
#include "ampt/kernels/fused_linear.h"
#include "ampt/kernels/weight_copies.h"

#include "ampt/models/gpt.h"
#include "ampt/precision/autocast_guard.h"
#include "support/autograd_graph.h"
#include "support/skip.h"

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <cmath>
#include <string>
#include <tuple>

using ampt::kernels::fused_linear;

namespace {

struct LinearRun {
  torch::Tensor y, dx, dw, db;
};

// y = f(x, w, b) for x [2, 24, 64], w [96, 64], b [96], and the gradients of Σ y·g.
template <class F>
LinearRun run_linear(F&& f, const torch::TensorOptions& options, c10::ScalarType autocast_dtype) {
  torch::manual_seed(51);
  const auto x = torch::randn({2, 24, 64}, options).requires_grad_(true);
  const auto w = (torch::randn({96, 64}, options) * 0.2).requires_grad_(true);
  const auto b = torch::randn({96}, options).requires_grad_(true);
  const auto g = torch::randn({2, 24, 96}, options);
  torch::Tensor y;
  {
    ampt::precision::AutocastGuard autocast(options.device().type(), autocast_dtype,
                                            autocast_dtype != torch::kFloat32);
    y = f(x, w, b);
  }
  (y.to(torch::kFloat32) * g).sum().backward();
  return {y.detach(), x.grad(), w.grad(), b.grad()};
}

}  // namespace

TEST_CASE("fused linear: at::linear's values and gradients bit for bit without the epilogue",
          "[kernels][fused_linear]") {
  const auto cpu = torch::TensorOptions();
  for (const auto dtype : {torch::kFloat32, torch::kBFloat16}) {
    for (const bool epilogues : {true, false}) {
      INFO("autocast " << dtype << (epilogues ? "" : ", --gemm_epilogues false"));
      const auto fused = run_linear(
          [&](const auto& x, const auto& w, const auto& b) { return fused_linear(x, w, b, epilogues); },
          cpu, dtype);
      const auto plain = run_linear(
          [](const auto& x, const auto& w, const auto& b) { return at::linear(x, w, b); }, cpu,
          dtype);
      CHECK(fused.y.dtype() == plain.y.dtype());
      CHECK(torch::equal(fused.y, plain.y));
      CHECK(torch::equal(fused.dx, plain.dx));
      CHECK(torch::equal(fused.dw, plain.dw));
      CHECK(torch::equal(fused.db, plain.db));
    }
  }
}

TEST_CASE("fused linear: on a GPU in half dtypes, at::linear's gradients to the dtype's rounding",
          "[kernels][fused_linear][cuda]") {
  if (!torch::cuda::is_available()) {
    AMPT_SKIP(gpu, "no CUDA device: the fused linear's epilogue needs one");
  }
  const auto gpu = torch::TensorOptions().device(torch::kCUDA, 0);
  for (const auto dtype : {torch::kBFloat16, torch::kHalf}) {
    INFO("autocast " << dtype);
    const auto fused = run_linear(
        [](const auto& x, const auto& w, const auto& b) { return fused_linear(x, w, b); }, gpu,
        dtype);
    const auto plain = run_linear(
        [](const auto& x, const auto& w, const auto& b) { return at::linear(x, w, b); }, gpu,
        dtype);
    CHECK(torch::equal(fused.y, plain.y));  // the forward is the same addmm
    // One GEMM's rounding against another's: within a few half ulps of the largest value.
    const double ulps = dtype == torch::kBFloat16 ? std::ldexp(1.0, -6) : std::ldexp(1.0, -9);
    for (const auto& [got, want, what] : {std::tuple{fused.dx, plain.dx, "dx"},
                                          {fused.dw, plain.dw, "dW"}, {fused.db, plain.db, "db"}}) {
      INFO(what << ": largest difference " << (got - want).abs().max().item<double>());
      CHECK(torch::allclose(got, want, ulps, ulps * want.abs().max().item<double>()));
    }
  }
}

TEST_CASE("fused linear: a GPT's attention is one node with --fused_kernels, and where it "
          "cannot be (dropout) its projections use fused_linear, unless --gemm_epilogues is off",
          "[kernels][fused_linear][models]") {
  const auto nodes = [](bool fused, bool epilogues, double dropout, const std::string& name) {
    torch::manual_seed(52);
    ampt::models::Gpt gpt(ampt::models::GptDims{1, 64, 4, 16, 128, dropout});
    gpt->set_fused(fused, epilogues);
    const auto tokens = torch::randint(0, 128, {2, 16}, torch::kInt64);
    return ampt::test::nodes_named(gpt->loss(tokens, tokens), name);
  };
  CHECK(nodes(true, true, 0.0, "CausalAttentionFunction") == 1);
  CHECK(nodes(true, true, 0.0, "FusedLinearFunction") == 0);
  CHECK(nodes(true, true, 0.1, "FusedLinearFunction") >= 2);  // c_attn and c_proj
  CHECK(nodes(true, false, 0.1, "FusedLinearFunction") == 0);
  CHECK(nodes(false, true, 0.0, "CausalAttentionFunction") == 0);
  CHECK(nodes(false, true, 0.0, "FusedLinearFunction") == 0);
}

TEST_CASE("fused linear over half copies: autocast's values, and a second micro-batch's weight "
          "gradient added in fp32 in its GEMM's operation",
          "[kernels][fused_linear][half_weights]") {
  namespace k = ampt::kernels;
  for (const auto dtype : {torch::kBFloat16, torch::kHalf}) {
    INFO(dtype);
    torch::manual_seed(52);
    const auto w = (torch::randn({96, 64}) * 0.2).requires_grad_(true);
    const auto b = torch::randn({96}).requires_grad_(true);
    const auto x1 = torch::randn({2, 24, 64}), x2 = torch::randn({2, 24, 64});
    const auto g1 = torch::randn({2, 24, 96}), g2 = torch::randn({2, 24, 96});
    for (const auto& p : {w, b}) k::allow_weight_copy(p, dtype, /*fp32_grad=*/true);
    const auto step = [&](const torch::Tensor& x, const torch::Tensor& g) {
      ampt::precision::AutocastGuard autocast(torch::kCPU, dtype, true);
      const auto y = k::linear(x, w, b);
      CHECK(torch::equal(y, at::linear(x, w, b)));  // autocast's own, bit for bit
      return (y.to(torch::kFloat32) * g).sum();
    };
    step(x1, g1).backward();
    const auto* first = w.grad().data_ptr<float>();
    step(x2, g2).backward();
    CHECK(w.grad().data_ptr<float>() == first);  // added into, not replaced
    CHECK(w.grad().scalar_type() == torch::kFloat32);
    // A CPU's GEMM rounds its product to the half dtype, as autocast's matmul does: each
    // micro-batch's is autocast's, and the two are summed in fp32.
    const auto half = [&](const torch::Tensor& t) { return t.to(dtype).view({-1, t.size(-1)}); };
    const auto product = [&](const torch::Tensor& g, const torch::Tensor& x) {
      return half(g).t().mm(half(x)).to(torch::kFloat32);
    };
    CHECK(torch::equal(w.grad(), product(g1, x1) + product(g2, x2)));
    CHECK(torch::equal(b.grad(), half(g1).sum(0).to(torch::kFloat32) +
                                     half(g2).sum(0).to(torch::kFloat32)));
    for (const auto& p : {w, b}) k::forbid_weight_copy(p);
  }
}

TEST_CASE("fused linear over half copies on a GPU: the weight gradients are the fp32 sums of the "
          "half products, no half rounding",
          "[kernels][fused_linear][half_weights][cuda]") {
  if (!torch::cuda::is_available()) {
    AMPT_SKIP(gpu, "no CUDA device: cuBLAS's fp32-output GEMM needs one");
  }
  namespace k = ampt::kernels;
  torch::manual_seed(53);
  const auto cuda = torch::TensorOptions().device(torch::kCUDA);
  const auto w = (torch::randn({96, 64}, cuda) * 0.2).requires_grad_(true);
  const auto b = torch::randn({96}, cuda).requires_grad_(true);
  const auto x = torch::randn({512, 64}, cuda), g = torch::randn({512, 96}, cuda);
  for (const auto& p : {w, b}) k::allow_weight_copy(p, torch::kBFloat16, /*fp32_grad=*/true);
  {
    ampt::precision::AutocastGuard autocast(torch::kCUDA, torch::kBFloat16, true);
    (k::linear(x, w, b).to(torch::kFloat32) * g).sum().backward();
  }
  const auto half = [](const torch::Tensor& t) {
    return t.to(torch::kBFloat16).to(torch::kFloat64).cpu();
  };
  const auto want = half(g).t().mm(half(x));
  const auto error = (w.grad().to(torch::kFloat64).cpu() - want).abs().max().item<double>();
  const auto rounded =
      (want.to(torch::kBFloat16).to(torch::kFloat64) - want).abs().max().item<double>();
  CHECK(error < rounded / 4);
  for (const auto& p : {w, b}) k::forbid_weight_copy(p);
}

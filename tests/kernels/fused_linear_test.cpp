// The Linear whose weight and bias gradients come from one GEMM: wherever the epilogue does not
// run (a CPU, float32, --gemm_epilogues false) the same values and gradients as at::linear, bit
// for bit, plain and under autocast; on a GPU in half dtypes, the gradients within the half
// dtype's rounding of at::linear's; and a GPT's attention uses it.
#include "ampt/kernels/fused_linear.h"

#include "ampt/models/gpt.h"
#include "ampt/precision/autocast_guard.h"
#include "support/autograd_graph.h"

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <cmath>
#include <string>
#include <tuple>

using ampt::kernels::fused_linear;

namespace {

struct Run {
  torch::Tensor y, dx, dw, db;
};

// y = f(x, w, b) for x [2, 24, 64], w [96, 64], b [96], and the gradients of Σ y·g.
template <class F>
Run run(F&& f, const torch::TensorOptions& options, c10::ScalarType autocast_dtype) {
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
      const auto fused = run(
          [&](const auto& x, const auto& w, const auto& b) { return fused_linear(x, w, b, epilogues); },
          cpu, dtype);
      const auto plain = run(
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
    WARN("no CUDA device: the fused linear's epilogue needs one");
    return;
  }
  const auto gpu = torch::TensorOptions().device(torch::kCUDA, 0);
  for (const auto dtype : {torch::kBFloat16, torch::kHalf}) {
    INFO("autocast " << dtype);
    const auto fused = run(
        [](const auto& x, const auto& w, const auto& b) { return fused_linear(x, w, b); }, gpu,
        dtype);
    const auto plain = run(
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

TEST_CASE("fused linear: a GPT's attention projections use it, unless --fused_kernels or "
          "--gemm_epilogues is off",
          "[kernels][fused_linear][models]") {
  const auto uses_it = [](bool fused, bool epilogues) {
    torch::manual_seed(52);
    ampt::models::Gpt gpt(ampt::models::GptDims{1, 64, 4, 16, 128, 0.0});
    gpt->set_fused(fused, epilogues);
    const auto tokens = torch::randint(0, 128, {2, 16}, torch::kInt64);
    return ampt::test::nodes_named(gpt->loss(tokens, tokens), "FusedLinearFunction");
  };
  CHECK(uses_it(true, true) >= 2);  // c_attn and c_proj
  CHECK(uses_it(true, false) == 0);
  CHECK(uses_it(false, true) == 0);
}

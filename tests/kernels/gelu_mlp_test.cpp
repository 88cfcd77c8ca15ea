// The MLP as one operation that keeps (CPU) or recomputes (GPU) its GELU's output for backward:
// the same output and gradients as two at::linear calls around at::gelu, in fp32 and under
// autocast (on a GPU in half dtypes, where the GEMM epilogues round differently, as close to
// float64 arithmetic as those calls), and on a GPU the memory it keeps for backward is less by
// the GELU's output.
#include "ampt/kernels/gelu_mlp.h"

#include "ampt/precision/autocast_guard.h"
#include "support/skip.h"

#include <ATen/record_function.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

using ampt::kernels::gelu_mlp;

namespace {

constexpr int64_t kWidth = 24, kHidden = 96;

std::vector<torch::Tensor> make_params(const torch::Device& device) {
  torch::manual_seed(29);
  const auto on = torch::TensorOptions().device(device);
  return {torch::randn({2, 8, kWidth}, on), torch::randn({kHidden, kWidth}, on) * 0.2,
          torch::randn({kHidden}, on) * 0.1, torch::randn({kWidth, kHidden}, on) * 0.1,
          torch::randn({kWidth}, on) * 0.1};
}

torch::Tensor unfused(const std::vector<torch::Tensor>& p, const std::string& approximate) {
  return at::linear(at::gelu(at::linear(p[0], p[1], p[2]), approximate), p[3], p[4]);
}

torch::Tensor fused(const std::vector<torch::Tensor>& p, const std::string& approximate) {
  return gelu_mlp(p[0], {p[1], p[2], p[3], p[4]}, approximate);
}

torch::Tensor fused_without_epilogues(const std::vector<torch::Tensor>& p,
                                      const std::string& approximate) {
  return gelu_mlp(p[0], {p[1], p[2], p[3], p[4]}, approximate, /*epilogues=*/false);
}

// As a GPU runs it by default: the GELU's output recomputed in backward.
torch::Tensor fused_recomputing(const std::vector<torch::Tensor>& p,
                                const std::string& approximate) {
  return gelu_mlp(p[0], {p[1], p[2], p[3], p[4]}, approximate, /*epilogues=*/true,
                  ampt::kernels::GeluOutput::recompute);
}

torch::Tensor fused_recomputing_without_epilogues(const std::vector<torch::Tensor>& p,
                                                  const std::string& approximate) {
  return gelu_mlp(p[0], {p[1], p[2], p[3], p[4]}, approximate, /*epilogues=*/false,
                  ampt::kernels::GeluOutput::recompute);
}

// What run_mlp() and exact() return, in order.
const std::vector<std::string> kResultNames{"output", "d_x", "d_fc_weight", "d_fc_bias",
                                            "d_proj_weight", "d_proj_bias"};

// Output and the gradients of all five inputs for sum(output · g).
template <class Fn>
std::vector<torch::Tensor> run_mlp(const std::vector<torch::Tensor>& params, Fn&& fn,
                               const std::string& approximate, c10::ScalarType autocast) {
  std::vector<torch::Tensor> leaves;
  for (const auto& t : params) leaves.push_back(t.detach().clone().requires_grad_(true));
  torch::Tensor out;
  {
    const auto device = params[0].device().type();
    ampt::precision::AutocastGuard guard(device, autocast == c10::kFloat ? c10::kBFloat16 : autocast,
                                         autocast != c10::kFloat);
    out = fn(leaves, approximate);
  }
  torch::manual_seed(31);
  (out.to(torch::kFloat32) * torch::randn(out.sizes(), out.options().dtype(torch::kFloat32)))
      .sum()
      .backward();
  std::vector<torch::Tensor> results{out.detach()};
  for (const auto& t : leaves) results.push_back(t.grad());
  return results;
}

using Mlp = torch::Tensor (*)(const std::vector<torch::Tensor>&, const std::string&);

void compare(const torch::Device& device, c10::ScalarType autocast, double tol,
             Mlp candidate = fused) {
  const auto params = make_params(device);
  for (const std::string approximate : {"tanh", "none"}) {
    const auto want = run_mlp(params, unfused, approximate, autocast);
    const auto got = run_mlp(params, candidate, approximate, autocast);
    for (size_t i = 0; i < want.size(); ++i) {
      INFO(kResultNames[i] << ", gelu " << approximate << ", max error "
                    << (got[i].to(torch::kFloat64) - want[i].to(torch::kFloat64)).abs().max().item<double>());
      CHECK(got[i].dtype() == want[i].dtype());
      CHECK(got[i].sizes() == want[i].sizes());
      CHECK(torch::allclose(got[i].to(torch::kFloat64), want[i].to(torch::kFloat64), tol, tol));
    }
  }
}

// The output and gradients run_mlp() gives, in float64 arithmetic on the inputs as `dtype` rounds
// them: x and the weights as autocast casts them, and the output's gradient g.
std::vector<torch::Tensor> exact(const std::vector<torch::Tensor>& params,
                                 const std::string& approximate, c10::ScalarType dtype) {
  std::vector<torch::Tensor> p;
  for (const auto& t : params) p.push_back(t.to(dtype).to(torch::kFloat64));
  const auto x = p[0].reshape({-1, kWidth});
  const auto pre = torch::addmm(p[2], x, p[1].t());
  const auto hidden = at::gelu(pre, approximate);
  const auto out = torch::addmm(p[4], hidden, p[3].t());
  torch::manual_seed(31);  // run_mlp()'s g
  const auto g = torch::randn(out.sizes(), params[0].options()).to(dtype).to(torch::kFloat64);
  const auto d_pre = at::gelu_backward(g.mm(p[3]), pre, approximate);
  return {out.view(params[0].sizes()), d_pre.mm(p[1]).view(params[0].sizes()), d_pre.t().mm(x),
          d_pre.sum(0), g.t().mm(hidden), g.sum(0)};
}

// In a half dtype on a GPU the GEMM epilogues (kernels/gemm_epilogues.h) round once where the
// ATen operations round after each, so the two differ by roundings, and more than a fixed
// tolerance allows. Against float64 arithmetic on the same inputs, the fused path's error may be
// ATen's own by a margin, and no more: a wrong operand or a missed term is errors of the values'
// own size.
void compare_errors(const torch::Device& device, c10::ScalarType autocast) {
  const auto params = make_params(device);
  for (const std::string approximate : {"tanh", "none"}) {
    const auto want = exact(params, approximate, autocast);
    const auto aten = run_mlp(params, unfused, approximate, autocast);
    const auto got = run_mlp(params, fused, approximate, autocast);
    for (size_t i = 0; i < want.size(); ++i) {
      const auto error = [&](const torch::Tensor& t) {
        return (t.to(torch::kFloat64) - want[i]).norm().item<double>();
      };
      const double half_ulp = std::ldexp(want[i].norm().item<double>(), -9);
      INFO(kResultNames[i] << ", gelu " << approximate << ": error " << error(got[i])
                           << ", ATen's " << error(aten[i]));
      CHECK(got[i].dtype() == aten[i].dtype());
      CHECK(error(got[i]) <= 1.5 * error(aten[i]) + half_ulp);
    }
  }
}

}  // namespace

TEST_CASE("gelu_mlp: output and gradients equal the two Linears around the GELU in fp32",
          "[kernels][gelu_mlp]") {
  compare(torch::kCPU, c10::kFloat, 1e-6);
  compare(torch::kCPU, c10::kFloat, 1e-6, fused_recomputing);
}

TEST_CASE("gelu_mlp: under bf16 autocast, the autocast Linears' values and dtypes",
          "[kernels][gelu_mlp]") {
  compare(torch::kCPU, c10::kBFloat16, 1e-6);
}

TEST_CASE("gelu_mlp: on a CPU the GELU runs once, its output kept for backward, and recomputing "
          "it runs it once more in backward, where the epilogues do not take it",
          "[kernels][gelu_mlp]") {
  static std::atomic<int> gelus{0};
  const auto handle = at::addGlobalCallback(
      at::RecordFunctionCallback([](const at::RecordFunction& fn)
                                     -> std::unique_ptr<at::ObserverContext> {
        if (std::strcmp(fn.name(), "aten::gelu") == 0) ++gelus;
        return nullptr;
      }).scopes({at::RecordScope::FUNCTION}));
  const auto params = make_params(torch::kCPU);
  CHECK(ampt::kernels::gelu_mlp_keeps_output(c10::kCPU));
  CHECK_FALSE(ampt::kernels::gelu_mlp_keeps_output(c10::kCUDA));
  for (const bool epilogues : {true, false}) {
    for (const bool recompute : {false, true}) {
      gelus = 0;
      const auto mlp = recompute ? (epilogues ? fused_recomputing : fused_recomputing_without_epilogues)
                                 : (epilogues ? fused : fused_without_epilogues);
      run_mlp(params, mlp, "tanh", c10::kFloat);
      INFO("epilogues " << epilogues << ", recompute " << recompute);
      CHECK(gelus == (recompute ? 2 : 1));
    }
  }
  at::removeCallback(handle);
}

TEST_CASE("gelu_mlp: frozen weights get no gradient and the input's is unchanged",
          "[kernels][gelu_mlp]") {
  const auto params = make_params(torch::kCPU);
  const auto want = run_mlp(params, unfused, "tanh", c10::kFloat)[1];
  const auto x = params[0].clone().requires_grad_(true);
  const auto out = gelu_mlp(x, {params[1], params[2], params[3], params[4]}, "tanh");
  torch::manual_seed(31);  // run_mlp()'s g
  (out * torch::randn(out.sizes())).sum().backward();
  CHECK(torch::allclose(x.grad(), want, 1e-6, 1e-6));
  for (size_t i = 1; i < params.size(); ++i) CHECK_FALSE(params[i].grad().defined());
}

TEST_CASE("gelu_mlp: on a GPU, the same values (half dtypes: as close as ATen's) and one "
          "[rows, hidden] tensor less kept for backward", "[kernels][gelu_mlp][cuda]") {
  if (!torch::cuda::is_available()) {
    AMPT_SKIP(gpu, "no CUDA device: gelu_mlp's memory on a GPU needs one");
  }
  const torch::Device gpu(torch::kCUDA, 0);
  compare(gpu, c10::kFloat, 1e-5);
  compare_errors(gpu, c10::kBFloat16);
  compare_errors(gpu, c10::kHalf);
  compare(gpu, c10::kBFloat16, 1e-6, fused_without_epilogues);  // the ATen ops themselves
  // Bytes held after the forward, the output and inputs aside: what autograd keeps.
  const auto kept = [&](auto&& fn) {
    std::vector<torch::Tensor> leaves;
    for (const auto& t : make_params(gpu)) leaves.push_back(t.requires_grad_(true));
    torch::cuda::synchronize();
    const auto allocated = [] {
      return c10::cuda::CUDACachingAllocator::getDeviceStats(0)
          .allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)]
          .current;
    };
    const auto before = allocated();
    const auto out = fn(leaves, std::string("tanh"));
    const auto held = allocated() - before - out.numel() * out.element_size();
    return held;
  };
  const int64_t gelu_output = 2 * 8 * kHidden * 4;  // fp32 [rows, hidden]: 12 × 512 bytes
  CHECK(kept(unfused) - kept(fused) == gelu_output);
}

// The cuBLASLt GEMMs with epilogues: on a GPU each result against the same arithmetic in float32
// on the same half inputs, in bfloat16 and float16; everywhere, the inputs they leave to ATen.
#include "ampt/kernels/gemm_epilogues.h"
#include "support/skip.h"

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <cmath>
#include <string>

using ampt::kernels::linear_gelu;
using ampt::kernels::linear_input_grad_dgelu;
using ampt::kernels::linear_weight_bias_grad;

namespace {

constexpr int64_t kRows = 40, kIn = 64, kOut = 136;

struct GemmInputs {
  torch::Tensor x, weight, bias, dy, pre;
};

GemmInputs make_gemm_inputs(const torch::TensorOptions& options) {
  torch::manual_seed(43);
  const auto f32 = options.dtype(torch::kFloat32);
  return {torch::randn({kRows, kIn}, f32).to(options),
          (torch::randn({kOut, kIn}, f32) * 0.2).to(options),
          (torch::randn({kOut}, f32) * 0.5).to(options),
          torch::randn({kRows, kOut}, f32).to(options),
          (torch::randn({kRows, kIn}, f32) * 2).to(options)};
}

torch::Tensor f32(const torch::Tensor& t) { return t.to(torch::kFloat32); }

// got, rounded once to a half dtype from float32 arithmetic that may use a faster tanh, against
// the float32 reference: within 2^-6 of each value plus 2^-8 of the largest. A transposed,
// misplaced or unapplied operand moves values by their own size.
void check_gemm_close(const torch::Tensor& got, const torch::Tensor& want, const std::string& what) {
  REQUIRE(got.sizes() == want.sizes());
  const auto error = (f32(got) - want).abs();
  const auto bound = want.abs() * std::ldexp(1.0, -6) + want.abs().max() * std::ldexp(1.0, -8);
  INFO(what << ": largest error " << error.max().item<double>() << ", largest ratio to bound "
            << (error / bound).max().item<double>());
  CHECK((error <= bound).all().item<bool>());
}

}  // namespace

TEST_CASE("gemm epilogues: CPU tensors go to ATen", "[kernels][gemm_epilogues]") {
  const auto cpu = make_gemm_inputs(torch::TensorOptions().dtype(torch::kBFloat16));
  CHECK_FALSE(linear_gelu(cpu.x, cpu.weight, cpu.bias).has_value());
  CHECK_FALSE(linear_input_grad_dgelu(cpu.dy, cpu.weight, cpu.pre).has_value());
  CHECK_FALSE(linear_weight_bias_grad(cpu.dy, cpu.x).has_value());
}

TEST_CASE("gemm epilogues: on a GPU, float32 and unaligned shapes go to ATen",
          "[kernels][gemm_epilogues][cuda]") {
  if (!torch::cuda::is_available()) {
    AMPT_SKIP(gpu, "no CUDA device: the cuBLASLt epilogues' refusals need one");
  }
  const auto gpu = torch::TensorOptions().device(torch::kCUDA, 0);
  const auto fp32 = make_gemm_inputs(gpu);
  CHECK_FALSE(linear_gelu(fp32.x, fp32.weight, fp32.bias).has_value());
  const auto half = make_gemm_inputs(gpu.dtype(torch::kBFloat16));
  // Rows of 12 elements (24 bytes) are not 16-byte aligned; a transposed view is not contiguous.
  const auto narrow_x = half.x.narrow(1, 0, 12).contiguous();
  CHECK_FALSE(
      linear_gelu(narrow_x, half.weight.narrow(1, 0, 12).contiguous(), half.bias).has_value());
  CHECK_FALSE(linear_weight_bias_grad(half.dy, half.x.t().contiguous().t()).has_value());
}

TEST_CASE("gemm epilogues: on a GPU, each equals its float32 arithmetic on the same inputs",
          "[kernels][gemm_epilogues][cuda]") {
  if (!torch::cuda::is_available()) {
    AMPT_SKIP(gpu, "no CUDA device: the cuBLASLt epilogues need one");
  }
  for (const auto dtype : {torch::kBFloat16, torch::kHalf}) {
    INFO("dtype " << c10::toString(dtype));
    const auto in = make_gemm_inputs(torch::TensorOptions().device(torch::kCUDA, 0).dtype(dtype));

    const auto forward = linear_gelu(in.x, in.weight, in.bias);
    REQUIRE(forward.has_value());
    const auto pre = torch::addmm(f32(in.bias), f32(in.x), f32(in.weight).t());
    check_gemm_close(forward->first, pre, "pre-activation");
    check_gemm_close(forward->second, torch::gelu(pre, "tanh"), "GELU output");

    const auto d_pre = linear_input_grad_dgelu(in.dy, in.weight, in.pre);
    REQUIRE(d_pre.has_value());
    check_gemm_close(*d_pre, torch::gelu_backward(f32(in.dy).mm(f32(in.weight)), f32(in.pre), "tanh"),
                "GELU input gradient");

    const auto grads = linear_weight_bias_grad(in.dy, in.x);
    REQUIRE(grads.has_value());
    check_gemm_close(grads->first, f32(in.dy).t().mm(f32(in.x)), "weight gradient");
    check_gemm_close(grads->second, f32(in.dy).sum(0), "bias gradient");
  }
}

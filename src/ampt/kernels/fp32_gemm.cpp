#include "ampt/kernels/fp32_gemm.h"

#include <ATen/core/grad_mode.h>
#include <ATen/record_function.h>

#include <utility>
#include <vector>

namespace ampt::kernels {
namespace {

// The gradient `param` already holds, taken from it to add into; undefined where there is none
// to take (not a leaf, none yet, or one autograd would not take back as it is).
torch::Tensor take_grad(const torch::Tensor& param) {
  if (!param.is_leaf() || at::GradMode::is_enabled()) return {};
  auto& grad = param.mutable_grad();
  if (!grad.defined() || grad.scalar_type() != c10::kFloat || !grad.is_contiguous() ||
      grad.sizes() != param.sizes() || grad.use_count() > 1) {
    return {};
  }
  return std::exchange(grad, torch::Tensor());
}

// out (+)= `value` (a half or fp32 tensor of out's shape), in fp32.
void add_or_copy(const torch::Tensor& out, const torch::Tensor& value, bool accumulate) {
  if (accumulate) {
    out.add_(value);
  } else {
    out.copy_(value);
  }
}

}  // namespace

void matmul_fp32(const torch::Tensor& out, const torch::Tensor& a, const torch::Tensor& b,
                 bool accumulate) {
  if (out.is_cuda() && a.scalar_type() != c10::kFloat) {
    auto& o = const_cast<torch::Tensor&>(out);
    if (accumulate) {
      at::addmm_out(o, out, a, b, c10::kFloat);
    } else {
      at::mm_out(o, a, b, c10::kFloat);
    }
    return;
  }
  if (a.scalar_type() == c10::kFloat) {
    add_or_copy(out, at::mm(a, b), accumulate);
    return;
  }
  // A CPU: oneDNN's half GEMM, its product added into the fp32 result. MKL's mixed GEMMs
  // (gemm_bf16bf16f32) measured 2-3x slower on the shapes of a step (2 cores, AVX-512 BF16), so
  // a CPU's product is rounded to the half dtype first, as autocast's matmul rounds it. One
  // operation of ampt's own in the step census, as cuBLAS's fp32-output GEMM is on a GPU.
  RECORD_FUNCTION("ampt::matmul_fp32", std::vector<c10::IValue>());
  add_or_copy(out, at::mm(a, b), accumulate);
}

torch::Tensor weight_grad_fp32(const torch::Tensor& dy, const torch::Tensor& x,
                               const torch::Tensor& weight) {
  auto grad = take_grad(weight);
  const bool accumulate = grad.defined();
  if (!accumulate) grad = torch::empty(weight.sizes(), dy.options().dtype(c10::kFloat));
  matmul_fp32(grad, dy.t(), x, accumulate);
  return grad;
}

torch::Tensor bias_grad_fp32(const torch::Tensor& dy, const torch::Tensor& bias) {
  auto grad = take_grad(bias);
  if (dy.is_cuda()) {
    // CUDA's reduction reads the half values and sums in fp32 into an fp32 result.
    const auto sum = at::sum(dy, {0}, false, c10::kFloat);
    return grad.defined() ? grad.add_(sum) : sum;
  }
  // A CPU's sum to fp32 would convert all of dy first: the half sum (autocast's), added in fp32,
  // as one operation (see matmul_fp32).
  RECORD_FUNCTION("ampt::bias_grad_fp32", std::vector<c10::IValue>());
  if (!grad.defined()) return dy.sum(0).to(c10::kFloat);
  return grad.add_(dy.sum(0));
}

}  // namespace ampt::kernels

#include "ampt/kernels/fp32_gemm.h"

#include <ATen/core/grad_mode.h>
#include <ATen/record_function.h>

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

// MKL's mixed-precision GEMMs, exported by the torch wheel's libtorch_cpu (which links MKL in):
// weak, so a LibTorch without them links too and takes the fallback.
extern "C" {
void cblas_gemm_bf16bf16f32(int layout, int trans_a, int trans_b, int m, int n, int k, float alpha,
                            const uint16_t* a, int lda, const uint16_t* b, int ldb, float beta,
                            float* c, int ldc) __attribute__((weak));
void cblas_gemm_f16f16f32(int layout, int trans_a, int trans_b, int m, int n, int k, float alpha,
                          const uint16_t* a, int lda, const uint16_t* b, int ldb, float beta,
                          float* c, int ldc) __attribute__((weak));
}

namespace ampt::kernels {
namespace {

constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;

// How MKL reads a row-major [rows, cols] operand: as it is, or as the transpose of a contiguous
// tensor; nullopt when neither.
struct Operand {
  int trans;
  int ld;
};
std::optional<Operand> as_operand(const torch::Tensor& t) {
  if (t.stride(1) == 1 && t.stride(0) >= t.size(1)) {
    return Operand{kNoTrans, static_cast<int>(t.stride(0))};
  }
  if (t.stride(0) == 1 && t.stride(1) >= t.size(0)) {
    return Operand{kTrans, static_cast<int>(t.stride(1))};
  }
  return std::nullopt;
}

// MKL on the CPU; false where it cannot take these operands.
bool mkl_matmul(const torch::Tensor& out, const torch::Tensor& a, const torch::Tensor& b,
                bool accumulate) {
  const auto gemm = a.scalar_type() == c10::kBFloat16 ? cblas_gemm_bf16bf16f32
                    : a.scalar_type() == c10::kHalf   ? cblas_gemm_f16f16f32
                                                      : nullptr;
  if (gemm == nullptr || !out.is_contiguous() || a.numel() == 0 || b.numel() == 0) return false;
  constexpr int64_t kIntMax = 0x7fffffff;
  if (a.size(0) > kIntMax || a.size(1) > kIntMax || b.size(1) > kIntMax) return false;
  const auto oa = as_operand(a), ob = as_operand(b);
  if (!oa || !ob) return false;
  // An operation of ampt's own in the step census, as a GPU's cuBLAS call is one.
  RECORD_FUNCTION("ampt::matmul_fp32", std::vector<c10::IValue>());
  gemm(kRowMajor, oa->trans, ob->trans, static_cast<int>(a.size(0)), static_cast<int>(b.size(1)),
       static_cast<int>(a.size(1)), 1.0f, static_cast<const uint16_t*>(a.data_ptr()), oa->ld,
       static_cast<const uint16_t*>(b.data_ptr()), ob->ld, accumulate ? 1.0f : 0.0f,
       out.data_ptr<float>(), static_cast<int>(out.size(1)));
  return true;
}

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
  if (out.is_cpu() && mkl_matmul(out, a, b, accumulate)) return;
  // float32 operands (and what MKL does not take): the product, then added or copied, as the
  // composite computes it.
  const auto product = at::mm(a, b);
  if (accumulate) {
    out.add_(product);
  } else {
    out.copy_(product);
  }
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
  const bool accumulate = grad.defined();
  if (dy.is_cuda()) {
    // CUDA's reduction reads the half values and sums in fp32 into an fp32 result.
    const auto sum = at::sum(dy, {0}, false, c10::kFloat);
    if (!accumulate) return sum;
    return grad.add_(sum);
  }
  // A CPU's sum to float32 would first convert all of dy: a GEMV against ones instead.
  if (!accumulate) grad = torch::empty({1, dy.size(1)}, dy.options().dtype(c10::kFloat));
  matmul_fp32(grad.view({1, dy.size(1)}), torch::ones({1, dy.size(0)}, dy.options()), dy,
              accumulate);
  return grad.view(bias.sizes());
}

}  // namespace ampt::kernels

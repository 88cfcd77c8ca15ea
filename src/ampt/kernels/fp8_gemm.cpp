#include "ampt/kernels/fp8_gemm.h"

#include <ATen/ops/_scaled_mm.h>

namespace ampt::kernels {

torch::Tensor fp8_gemm(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& scale_a,
                       const torch::Tensor& scale_b, const torch::Tensor& bias,
                       c10::ScalarType out_dtype, bool fast_accum) {
  const bool per_tensor = scale_a.dim() == 0 && scale_b.dim() == 0;
  // Row-wise, _scaled_mm wants a column of factors for a and a row for b.
  const auto factor_a = per_tensor ? scale_a : scale_a.reshape({-1, 1});
  const auto factor_b = per_tensor ? scale_b : scale_b.reshape({1, -1});
  if (a.is_cuda()) {
    return at::_scaled_mm(a, b, factor_a, factor_b,
                          bias.defined() ? std::optional<torch::Tensor>(bias) : std::nullopt,
                          /*scale_result=*/{}, out_dtype, fast_accum);
  }
  // A CPU's _scaled_mm (oneDNN) takes about 0.3 s a call whatever the size, and per-tensor
  // factors only: the same product, computed from the dequantised operands in float32, under
  // _scaled_mm's layout rules so that a CPU test catches what a GPU would refuse.
  TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && a.stride(1) == 1 && b.stride(0) == 1,
              "fp8_gemm: a must be row-major and b column-major, got strides ", a.strides(),
              " and ", b.strides());
  auto product = at::mm(a.to(torch::kFloat32) * factor_a, b.to(torch::kFloat32) * factor_b);
  if (bias.defined()) product.add_(bias.to(torch::kFloat32));
  return product.to(out_dtype);
}

}  // namespace ampt::kernels

// The fp8 matrix product of two quantised operands (fp8_quantize.h) with the factors that
// dequantise them, through at::_scaled_mm (cuBLASLt on a GPU).
#pragma once

#include <torch/types.h>

namespace ampt::kernels {

// a [M, K] row-major · b [K, N] column-major (fp8) → [M, N] in out_dtype, each product dequantised
// by scale_a (0-dim, or [M]: one per row of a) and scale_b (0-dim, or [N]: one per column of b),
// plus bias [N] when defined (per-tensor factors: bfloat16 output only). fast_accum: cuBLASLt's
// fast accumulation, which never promotes the fp8 tensor cores' partial sums to fp32 (forward
// GEMMs, as TransformerEngine); without it they are promoted periodically. On a CPU, whose
// _scaled_mm is slow and takes per-tensor factors only, the product of the dequantised operands
// in float32: what _scaled_mm computes there.
torch::Tensor fp8_gemm(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& scale_a,
                       const torch::Tensor& scale_b, const torch::Tensor& bias,
                       c10::ScalarType out_dtype, bool fast_accum);

}  // namespace ampt::kernels

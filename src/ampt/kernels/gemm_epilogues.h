// GEMMs that finish the elementwise work around them in cuBLASLt's epilogue, where the values are
// still in registers, instead of writing the product out for a separate pass to read back: the
// MLP's bias + GELU in forward, the GELU's gradient and the bias gradients in backward (the
// fusions TransformerEngine's LayerNormMLP runs on Hopper). cuBLASLt's GELU is the tanh
// approximation. ATen exposes only the forward GELU, and without the pre-activation that backward
// needs (at::_addmm_activation), so these call cuBLASLt themselves, on ATen's handle, workspace
// and current stream.
//
// Row-major 2-D tensors of one half dtype (bfloat16 or float16), contiguous, on one CUDA device,
// with every row 16-byte aligned. Each function returns nothing where those do not hold or
// cuBLASLt has no algorithm for the shape; the caller then runs the ATen operations.
#pragma once

#include <torch/types.h>

#include <optional>

namespace ampt::kernels {

struct GemmPair {
  torch::Tensor first, second;
};

// x [rows, in], weight [out, in], bias [out] → {pre = x·weightᵀ + bias, gelu_tanh(pre)}.
std::optional<GemmPair> linear_gelu(const torch::Tensor& x, const torch::Tensor& weight,
                                    const torch::Tensor& bias);

// dy [rows, out], weight [out, in], pre [rows, in] → (dy·weight) ⊙ gelu_tanh'(pre): the gradient
// of the GELU's input when dy is that of the Linear reading its output.
std::optional<torch::Tensor> linear_input_grad_dgelu(const torch::Tensor& dy,
                                                     const torch::Tensor& weight,
                                                     const torch::Tensor& pre);

// dy [rows, out], x [rows, in] → {dyᵀ·x, Σ_rows dy}: a Linear's weight and bias gradients.
std::optional<GemmPair> linear_weight_bias_grad(const torch::Tensor& dy, const torch::Tensor& x);

}  // namespace ampt::kernels

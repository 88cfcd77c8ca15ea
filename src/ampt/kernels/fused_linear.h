// A Linear, x·Wᵀ + b, whose backward takes the weight's and the bias's gradients from one GEMM on
// a GPU in bfloat16 or float16 (cuBLASLt's BGRADB epilogue, gemm_epilogues.h) instead of a GEMM
// and a separate pass over the output gradient for the bias: one read of a [tokens, out] half
// tensor fewer per Linear, as TransformerEngine's Linear. Everywhere else, and with `epilogues`
// false, the operations at::linear and its backward run, in the same order, so values and
// gradients are the unfused ones.
#pragma once

#include <torch/types.h>

#include <functional>

namespace ampt::kernels {

// t as autocast hands it to a Linear (its weight cache included) where autocast is on for t's
// device, else t: an operation that does a Linear's work sees its arguments already cast, so
// autocast leaves the matmuls inside alone.
torch::Tensor autocast_linear_arg(const torch::Tensor& t);

// x [..., in], weight [out, in], bias [out] → [..., out]; under autocast in autocast's dtype.
torch::Tensor fused_linear(const torch::Tensor& x, const torch::Tensor& weight,
                           const torch::Tensor& bias, bool epilogues = true);

struct LinearParamGrads {
  torch::Tensor weight, bias;
};

// A Linear's weight and bias gradients from its output's gradient d_out [rows, out] and its input
// [rows, in] (made by `input` once, and only if the weight's is wanted), those wanted: one BGRADB
// GEMM where `epilogues` allows and both are, else d_outᵀ·input and Σ_rows d_out as
// AddmmBackward0 forms them.
LinearParamGrads linear_param_grads(const torch::Tensor& d_out,
                                    const std::function<torch::Tensor()>& input, bool weight,
                                    bool bias, bool epilogues);

}  // namespace ampt::kernels

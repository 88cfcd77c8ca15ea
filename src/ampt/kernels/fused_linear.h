// A Linear, x·Wᵀ + b, whose backward takes the weight's and the bias's gradients from one GEMM on
// a GPU in bfloat16 or float16 (cuBLASLt's BGRADB epilogue, gemm_epilogues.h) instead of a GEMM
// and a separate pass over the output gradient for the bias: one read of a [tokens, out] half
// tensor fewer per Linear, as TransformerEngine's Linear. Everywhere else, and with `epilogues`
// false, the operations at::linear and its backward run, in the same order, so values and
// gradients are the unfused ones.
//
// Where the weight has a half copy (weight_copies.h: O1's half working weights), the matmul
// reads the copy instead of autocast's cast of the weight, and the gradients go to the fp32
// weight and bias: in fp32 straight from the GEMM (fp32_gemm.h), or, where the copy says so, as
// autocast's path makes them (half, then cast), the same values as without the copy.
#pragma once

#include <torch/csrc/autograd/function.h>
#include <torch/types.h>

#include <functional>
#include <initializer_list>
#include <optional>

namespace ampt::kernels {

// t as autocast hands it to a Linear (its weight cache included) where autocast is on for t's
// device, else t: an operation that does a Linear's work sees its arguments already cast, so
// autocast leaves the matmuls inside alone.
torch::Tensor autocast_linear_arg(const torch::Tensor& t);

// `t`, or none where it is undefined: autograd's custom functions take an optional tensor where
// one may be missing, never an undefined one.
std::optional<torch::Tensor> optional_tensor(const torch::Tensor& t);

// The half copies a Linear with `weight` and `bias` (may be undefined) reads now: both or
// neither (weight undefined).
struct LinearCopies {
  torch::Tensor weight, bias;
  bool fp32_grad = false;
};
LinearCopies linear_copies(const torch::Tensor& weight, const torch::Tensor& bias);

// What an operation over two Linears (gelu_mlp, fused_attention) hands its autograd function:
// the four weights and, where both Linears have them (and take their gradients alike), their
// half copies; else autocast's casts of the four and no copies.
struct TwoLinearArgs {
  torch::Tensor weight1, bias1, weight2, bias2;
  std::optional<torch::Tensor> copy_weight1, copy_bias1, copy_weight2, copy_bias2;
  bool fp32_grad = false;
};
TwoLinearArgs two_linear_args(const torch::Tensor& weight1, const torch::Tensor& bias1,
                              const torch::Tensor& weight2, const torch::Tensor& bias2);

// addmm(bias, mat, weightᵀ) [rows, out] written into a new tensor of `sizes` [..., out]: an
// autograd function that takes its input in its own shape [..., in] and reshapes it inside (so
// that no view node stands between it and its caller in backward) returns this tensor itself,
// not a view of the product (a view made inside an autograd function may not be modified in
// place later).
torch::Tensor addmm_as(at::IntArrayRef sizes, const torch::Tensor& bias, const torch::Tensor& mat,
                       const torch::Tensor& weight);

// A backward's gradients for an autograd function of `inputs` arguments: `grads` for the first
// ones, none for the rest (the arguments that take none: flags, sizes, copies).
torch::autograd::variable_list gradients(std::initializer_list<torch::Tensor> grads,
                                         size_t inputs);

// x [..., in], weight [out, in], bias [out] (or undefined) → [..., out]; under autocast in
// autocast's dtype.
torch::Tensor fused_linear(const torch::Tensor& x, const torch::Tensor& weight,
                           const torch::Tensor& bias, bool epilogues = true);

// at::linear(x, weight, bias), except where the weight has a half copy (weight_copies.h): then
// fused_linear over the copies without the epilogues, at::linear's arithmetic on the same
// values; and in exact mode (batch_invariant.h) invariant_linear. Every Linear of ampt's models
// runs through this or fused_linear.
torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight,
                     const torch::Tensor& bias);

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

// The same for a Linear that read half copies of fp32 `weight` and `bias`: their fp32 gradients,
// with `fp32_grad` straight from fp32-output GEMMs (fp32_gemm.h), else linear_param_grads's half
// ones cast (autocast's values).
LinearParamGrads half_param_grads(const torch::Tensor& d_out,
                                  const std::function<torch::Tensor()>& input,
                                  const torch::Tensor& weight, const torch::Tensor& bias,
                                  bool want_weight, bool want_bias, bool epilogues,
                                  bool fp32_grad);

}  // namespace ampt::kernels

// GEMMs of half-precision operands that write float32: the weight gradients of a Linear that
// computes with half copies of its fp32 weights accumulate in fp32 straight from the GEMM
// (Megatron-LM's gradient_accumulation_fusion, TransformerEngine's main_grad). On a GPU cuBLAS
// with half A/B and fp32 C/D (beta = 1 to accumulate), no half product at all; on a CPU, where
// that is slower, oneDNN's half GEMM added into the fp32 result in the same operation (the
// values autocast's path gives there).
#pragma once

#include <torch/types.h>

namespace ampt::kernels {

// out (+)= a · b: a [m, k], b [k, n] of one dtype, out [m, n] float32 contiguous; `accumulate`
// adds into out, else overwrites it. float32 operands: the fp32 product, then added or copied.
void matmul_fp32(const torch::Tensor& out, const torch::Tensor& a, const torch::Tensor& b,
                 bool accumulate);

// The float32 gradient of `weight` (fp32; a parameter, or a view of one) for a Linear that read a
// half copy of it: dyᵀ · x from dy [rows, out] and x [rows, in], half. When `weight` is a leaf
// that already holds a gradient (this step's earlier micro-batches), the GEMM adds into that
// gradient, which is taken from the parameter and returned: autograd's AccumulateGrad then takes
// it back as it is, with no add and no second buffer.
torch::Tensor weight_grad_fp32(const torch::Tensor& dy, const torch::Tensor& x,
                               const torch::Tensor& weight);

// Σ_rows dy as `bias`'s float32 gradient, accumulated likewise.
torch::Tensor bias_grad_fp32(const torch::Tensor& dy, const torch::Tensor& bias);

}  // namespace ampt::kernels

// A transformer's MLP, c_proj(gelu(c_fc(x))), as one autograd operation that keeps c_fc's
// output (the GELU's input) for backward. On a GPU it recomputes the GELU's output there instead
// of keeping it too: the [tokens, 4·width] half tensor autograd would hold per block (1.2 GB for
// gpt2-124m at batch 16 × 1024 in bf16) for one memory-bound elementwise pass in backward, the
// trade torch.compile's partitioner makes. On a CPU that pass is a tanh per element, compute the
// step waits for (7% of a gpt-tiny fp32 step at batch 128 × 64), where memory is seldom the
// limit: the output is kept, as autograd keeps it (GeluOutput). On a GPU, in bfloat16 or float16
// with the tanh GELU (GPT-2's), the GEMMs do the bias, the GELU, its gradient and the bias
// gradients in their epilogues (gemm_epilogues.h): the same arithmetic on values not yet rounded
// to the half dtype, and four passes over a [tokens, 4·width] tensor fewer. Everywhere else the
// same ATen operations as the two Linears and the GELU run one by one, in the same order, so
// values and gradients are the unfused ones. Where the four weights have half copies (weight_copies.h) the GEMMs read those
// and the weights' gradients are fp32, as fused_linear's.
#pragma once

#include <torch/types.h>

#include <string>

namespace ampt::kernels {

// What backward does for the GELU's output that c_proj's weight gradient reads.
enum class GeluOutput {
  by_device,  // kept on a CPU, recomputed on a GPU (gelu_mlp_keeps_output)
  keep,
  recompute,
};

// Whether the MLP on `device` keeps its GELU's output for backward (GeluOutput::by_device); the
// memory estimate counts it where it does.
bool gelu_mlp_keeps_output(c10::DeviceType device);

struct GeluMlpWeights {
  const torch::Tensor& fc_weight;    // [hidden, width]
  const torch::Tensor& fc_bias;      // [hidden]
  const torch::Tensor& proj_weight;  // [width, hidden]
  const torch::Tensor& proj_bias;    // [width]
};

// x [..., width] → [..., width]. Under autocast the inputs are cast as autocast casts a Linear's
// (its weight cache included) and the operation runs in autocast's dtype. `approximate`:
// "none" or "tanh", as at::gelu. Gradients flow to x and the four weights. `epilogues` false
// keeps the GELU and the bias gradients out of the GEMMs everywhere.
torch::Tensor gelu_mlp(const torch::Tensor& x, const GeluMlpWeights& weights,
                       const std::string& approximate, bool epilogues = true,
                       GeluOutput output = GeluOutput::by_device);

}  // namespace ampt::kernels

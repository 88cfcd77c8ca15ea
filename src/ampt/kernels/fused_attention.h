// A GPT block's causal self-attention, c_proj(sdpa(split_heads(c_attn(x)))), as one autograd
// operation with its own backward: where autograd walks some sixteen nodes per block (the two
// Linears, a split, a view and a transpose per head tensor, the attention, the transpose and copy
// back), the host walks one. The attention is the kernel scaled_dot_product_attention picks for
// these inputs (flash attention on a GPU in bf16/fp16, the CPU's flash kernel), called directly
// with the backward PyTorch pairs with it, and the Linears are fused_linear's (epilogues, half
// copies, fp32 weight gradients), so values and gradients are the composite's, bit for bit.
#pragma once

#include <torch/types.h>

#include <optional>

namespace ampt::kernels {

struct AttentionWeights {
  const torch::Tensor& attn_weight;  // [3·C, C]
  const torch::Tensor& attn_bias;    // [3·C]
  const torch::Tensor& proj_weight;  // [C, C]
  const torch::Tensor& proj_bias;    // [C]
};

// x [B, T, C] → [B, T, C] with `heads` heads, causal, no dropout; under autocast in autocast's
// dtype. nullopt where scaled_dot_product_attention would pick another kernel than a flash one
// for these inputs (the caller then runs the composite).
std::optional<torch::Tensor> fused_causal_attention(const torch::Tensor& x,
                                                    const AttentionWeights& weights, int64_t heads,
                                                    bool epilogues);

}  // namespace ampt::kernels

// Causal multi-head self-attention of a GPT block.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>

namespace ampt::models {

// One fused q/k/v projection, scaled dot-product attention with a causal mask, and an output
// projection. Names follow nanoGPT (c_attn, c_proj) so state dicts line up with GPT-2's.
class CausalSelfAttentionImpl : public torch::nn::Module {
 public:
  CausalSelfAttentionImpl(int64_t n_embd, int64_t n_head, double dropout);
  // x: [B, T, n_embd] → [B, T, n_embd]; position t attends to positions ≤ t only.
  torch::Tensor forward(const torch::Tensor& x);

  torch::nn::Linear c_attn{nullptr};
  torch::nn::Linear c_proj{nullptr};  // a residual projection: GPT-2 scales its init

 private:
  int64_t n_head_;
  double dropout_;
  torch::nn::Dropout resid_dropout_{nullptr};
};
TORCH_MODULE(CausalSelfAttention);

}  // namespace ampt::models

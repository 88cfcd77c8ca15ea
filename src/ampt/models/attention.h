// Causal multi-head self-attention of a GPT block.
#pragma once

#include "ampt/models/kv_cache.h"
#include "ampt/models/linear.h"
#include "ampt/models/packed_sequences.h"

#include <torch/nn/module.h>
#include <torch/nn/modules/dropout.h>

#include <utility>

namespace ampt::models {

// One fused q/k/v projection, scaled dot-product attention with a causal mask, and an output
// projection. Names follow nanoGPT (c_attn, c_proj) so state dicts line up with GPT-2's.
class CausalSelfAttentionImpl : public torch::nn::Module {
 public:
  // `block`: its block's inventory entries (its Linears' names and shapes).
  CausalSelfAttentionImpl(int64_t n_head, double dropout, const std::vector<LinearLayer>& block);
  // x: [B, T, n_embd] → [B, T, n_embd]; position t attends to positions ≤ t only, and only to
  // those of its own example where `packed` cuts the rows into examples.
  torch::Tensor forward(const torch::Tensor& x, const PackedLayout& packed = {});
  // The same for new positions after the `step.held` whose keys and values `cache` holds, which
  // it then holds too (cached_attention, kv_cache.h): generation computes each position once.
  torch::Tensor forward_cached(const torch::Tensor& x, const CacheStep& step,
                               std::pair<torch::Tensor, torch::Tensor>& cache);

  Linear c_attn{nullptr};
  Linear c_proj{nullptr};  // a residual projection: GPT-2 scales its init

  // --fused_kernels: the attention as one operation (kernels/fused_attention.h) where nothing
  // needs its parts (both Linears plain, no dropout); `epilogues`: c_attn and c_proj, where
  // plain, take their weight and bias gradients from one GEMM (kernels/fused_linear.h;
  // --gemm_epilogues).
  void set_fused(bool fused, bool epilogues) {
    fused_ = fused;
    epilogues_ = epilogues;
  }

 private:
  // [B, T, C] → [B, n_head, T, C / n_head]
  torch::Tensor heads(const torch::Tensor& t) const;
  // The attention output [B, n_head, T, head_dim] back to [B, T, C] through c_proj.
  torch::Tensor project_out(const torch::Tensor& y);

  int64_t n_head_;
  double dropout_;
  bool fused_ = true;
  bool epilogues_ = true;
  torch::nn::Dropout resid_dropout_{nullptr};
};
TORCH_MODULE(CausalSelfAttention);

}  // namespace ampt::models

#include "ampt/models/attention.h"

#include "ampt/kernels/batch_invariant.h"
#include "ampt/kernels/fused_attention.h"

namespace ampt::models {

CausalSelfAttentionImpl::CausalSelfAttentionImpl(int64_t n_head, double dropout,
                                                 const std::vector<LinearLayer>& block)
    : n_head_(n_head), dropout_(dropout) {
  c_attn = register_declared(*this, block, LinearRole::qkv);
  c_proj = register_declared(*this, block, LinearRole::o);
  resid_dropout_ = register_module("resid_dropout", torch::nn::Dropout(dropout));
}

torch::Tensor CausalSelfAttentionImpl::heads(const torch::Tensor& t) const {
  return t.view({t.size(0), t.size(1), n_head_, t.size(2) / n_head_}).transpose(1, 2);
}

torch::Tensor CausalSelfAttentionImpl::project_out(const torch::Tensor& y) {
  const int64_t batch = y.size(0), time = y.size(2), width = y.size(1) * y.size(3);
  return resid_dropout_->forward(
      c_proj->forward(y.transpose(1, 2).contiguous().view({batch, time, width}), epilogues_));
}

torch::Tensor CausalSelfAttentionImpl::forward(const torch::Tensor& x, const PackedLayout& packed) {
  const bool whole = fused_ && !kernels::batch_invariant() && !packed.packed() && c_attn->plain() &&
                     c_proj->plain() && (dropout_ == 0.0 || !is_training());
  if (whole) {
    const kernels::AttentionWeights weights{c_attn->weight, c_attn->bias, c_proj->weight,
                                            c_proj->bias};
    if (auto out = kernels::fused_causal_attention(x, weights, n_head_, epilogues_)) return *out;
  }
  // [B, T, 3C] → three [B, n_head, T, head_dim] views, the layout SDPA expects.
  const auto qkv = c_attn->forward(x, epilogues_).split(x.size(2), /*dim=*/2);
  const double dropout = is_training() ? dropout_ : 0.0;
  if (packed.packed()) {
    return project_out(
        packed_attention(heads(qkv[0]), heads(qkv[1]), heads(qkv[2]), packed, dropout));
  }
  // Attention dropout only while training, as nn.Dropout.
  return project_out(causal_attention(heads(qkv[0]), heads(qkv[1]), heads(qkv[2]), dropout));
}

torch::Tensor CausalSelfAttentionImpl::forward_cached(
    const torch::Tensor& x, const CacheStep& step, std::pair<torch::Tensor, torch::Tensor>& cache) {
  const auto qkv = c_attn->forward(x).split(x.size(2), /*dim=*/2);
  return project_out(cached_attention(heads(qkv[0]), heads(qkv[1]), heads(qkv[2]), cache, step));
}

}  // namespace ampt::models

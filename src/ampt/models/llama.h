// The Llama architecture (Meta's Llama 2/3, Qwen2 with its q/k/v biases, Qwen3 with its q/k
// norms and wider heads, Mistral): RMSNorm before each sublayer, rotary positions, grouped-query
// attention, a SwiGLU MLP, and a head tied to the token embedding or not. Parameter names are
// Hugging Face's without "model.": embed_tokens, layers.N.self_attn.q_proj, ..., norm, lm_head.
#pragma once

#include "ampt/models/decoder.h"
#include "ampt/models/linear.h"
#include "ampt/models/llama_presets.h"
#include "ampt/models/moe.h"
#include "ampt/models/packed_sequences.h"
#include "ampt/models/rotary.h"
#include "ampt/precision/precision_islands.h"

#include <torch/nn/module.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include <string>
#include <utility>
#include <vector>

namespace ampt::models {

// x / sqrt(mean(x²) + eps) · weight, the statistics and the division in float32 whatever the
// input's dtype (the result cast back before the weight, as transformers' LlamaRMSNorm): an fp32
// island under every opt level, and a norm by role (precision::NormRole) for O2's islands.
class RmsNormImpl : public torch::nn::Module, public precision::NormRole {
 public:
  RmsNormImpl(int64_t dim, double eps);
  torch::Tensor forward(const torch::Tensor& x);

  torch::Tensor weight;

 private:
  double eps_;
};
TORCH_MODULE(RmsNorm);

// Causal self-attention with n_head query heads sharing n_kv_head key/value heads (SDPA's
// enable_gqa), rotary positions on queries and keys, within a sliding window where `spec` has
// one; Qwen3's normalise each query and key head (q_norm, k_norm over head_dim) before the
// rotation.
class LlamaAttentionImpl : public torch::nn::Module {
 public:
  // `block`: its block's inventory entries (its Linears' names and shapes).
  LlamaAttentionImpl(const LlamaDims& dims, const std::vector<LinearLayer>& block, AttentionSpec spec);
  // x [B, T, C] at the positions `angles` holds → [B, T, C], each token attending within its
  // own example where `packed` cuts the rows into examples.
  torch::Tensor forward(const torch::Tensor& x, const RotaryAngles& angles,
                        const PackedLayout& packed = {});
  // The same for new positions after the `step.held` whose keys and values `cache` holds,
  // which it then holds too (cached_attention, kv_cache.h).
  torch::Tensor forward_cached(const torch::Tensor& x, const RotaryAngles& angles,
                               const CacheStep& step, std::pair<torch::Tensor, torch::Tensor>& cache);

  Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};
  RmsNorm q_norm{nullptr}, k_norm{nullptr};  // Qwen3's; none otherwise

 private:
  struct Qkv {
    torch::Tensor q, k, v;
  };
  // [B, T, heads · head_dim] → [B, heads, T, head_dim]
  torch::Tensor heads(const torch::Tensor& t, int64_t count) const;
  // Qwen3's per-head norm of `heads` before the rotation; without one, the heads as they are.
  static torch::Tensor normed(RmsNorm& norm, const torch::Tensor& heads);
  // The projections of x into heads, queries and keys rotated to `angles`' positions.
  Qkv qkv(const torch::Tensor& x, const RotaryAngles& angles);
  torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                       const PackedLayout& packed);
  // The attention's output [B, heads, T, head_dim] back to [B, T, C] through o_proj.
  torch::Tensor project_out(const torch::Tensor& y);

  int64_t n_head_, n_kv_head_, head_dim_;
  double dropout_;
  AttentionSpec spec_;
};
TORCH_MODULE(LlamaAttention);

// down_proj(silu(gate_proj(x)) · up_proj(x)), no biases.
class LlamaMlpImpl : public torch::nn::Module {
 public:
  explicit LlamaMlpImpl(const std::vector<LinearLayer>& block);
  torch::Tensor forward(const torch::Tensor& x);

  Linear gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};
};
TORCH_MODULE(LlamaMlp);

// x + attn(input_layernorm(x)), then + mlp(post_attention_layernorm(·)); block `layer`'s MLP is
// the experts (SparseMoe, registered as mlp) where dims.moe makes it sparse, and its forward
// reports their router logits.
class LlamaBlockImpl : public DecoderBlockImpl {
 public:
  // `block`: block `layer`'s Linears; `sparse`: its router and expert groups where it is sparse.
  LlamaBlockImpl(const LlamaDims& dims, int64_t layer, const std::vector<LinearLayer>& block,
                 const SparseLayers& sparse);
  BlockOutputs forward(const torch::Tensor& x, const BlockContext& context) override;
  torch::Tensor forward_cached(const torch::Tensor& x, const BlockContext& context,
                               std::pair<torch::Tensor, torch::Tensor>& cache) override;

  RmsNorm input_layernorm{nullptr};
  LlamaAttention self_attn{nullptr};
  RmsNorm post_attention_layernorm{nullptr};
  LlamaMlp mlp{nullptr};
  SparseMoe moe{nullptr};  // instead of mlp

 private:
  // h + the MLP of post_attention_layernorm(h), and the router's logits where sparse.
  BlockOutputs mlp_residual(const torch::Tensor& h);
};
TORCH_MODULE(LlamaBlock);

// The decoder (decoder.h) with token embeddings, Llama blocks at rotary positions, a final
// RMSNorm and lm_head, or the embedding when tied.
class LlamaImpl : public DecoderImpl {
 public:
  // transformers' initialisation: Linear and Embedding weights normal(0, 0.02), biases 0, norms 1.
  explicit LlamaImpl(const LlamaDims& dims);

  const LlamaDims& dims() const { return dims_; }
  // aux_loss, z_loss (where its weight is not 0), expert_load/max and expert_load/min; none
  // without experts.
  std::vector<std::string> auxiliary_figure_names() const override;

 protected:
  torch::Tensor embed(const torch::Tensor& tokens, const TokenPositions& at) override;
  // The rotary angles of `at`'s positions, worked out once for every block.
  BlockContext block_context(const TokenPositions& at, PackedLayout packed) override;
  torch::Tensor final_norm(const torch::Tensor& x) override;
  // The sparse blocks' load-balancing loss at router_aux_loss_coef and z-loss at
  // router_z_loss_coef (moe.h); their figures and the experts' load.
  AuxiliaryLoss auxiliary_loss(const std::vector<torch::Tensor>& reports) const override;

  // lm_head's weight, or embed_tokens' when tied.
  torch::Tensor head_weight() const override;
  int64_t classes() const override { return dims_.vocab_size; }
  const torch::nn::Module& head_module() const override;
  c10::ScalarType activation_dtype() const override {
    return embed_tokens_->weight.scalar_type();
  }

 private:
  // The rotary frequencies on `device`, where the rotary angles are worked out.
  const torch::Tensor& inv_freq_on(const torch::Device& device);

  LlamaDims dims_;
  torch::Tensor inv_freq_;  // not a parameter nor a buffer: derived from dims, on the last device used
  torch::nn::Embedding embed_tokens_{nullptr};
  RmsNorm norm_{nullptr};
  torch::nn::Linear lm_head_{nullptr};  // none when tied
};
TORCH_MODULE(Llama);

}  // namespace ampt::models

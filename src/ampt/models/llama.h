// The Llama architecture (Meta's Llama 2/3, and Qwen2 with its q/k/v biases): RMSNorm before
// each sublayer, rotary positions, grouped-query attention, a SwiGLU MLP, and a head tied to the
// token embedding or not. Parameter names are Hugging Face's without "model.": embed_tokens,
// layers.N.self_attn.q_proj, ..., norm, lm_head.
#pragma once

#include "ampt/models/block_hooks.h"
#include "ampt/models/kv_cache.h"
#include "ampt/models/llama_presets.h"
#include "ampt/models/packed_sequences.h"
#include "ampt/models/rotary.h"
#include "ampt/precision/fp8_layers.h"
#include "ampt/precision/fp8_linear.h"
#include "ampt/precision/precision_islands.h"

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
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
// enable_gqa), rotary positions on queries and keys.
class LlamaAttentionImpl : public torch::nn::Module {
 public:
  explicit LlamaAttentionImpl(const LlamaDims& dims);
  // x [B, T, C] at the positions `angles` holds → [B, T, C], each token attending within its
  // own example where `packed` cuts the rows into examples.
  torch::Tensor forward(const torch::Tensor& x, const RotaryAngles& angles,
                        const PackedLayout& packed = {});
  // The same for new positions after those `cache` holds, which it then holds too (the whole
  // prompt into an empty cache, then one position at a time).
  torch::Tensor forward_cached(const torch::Tensor& x, const RotaryAngles& angles,
                               std::pair<torch::Tensor, torch::Tensor>& cache);

  torch::nn::Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};
  c10::intrusive_ptr<precision::Fp8Linear> fp8_q, fp8_k, fp8_v, fp8_o;

 private:
  struct Qkv {
    torch::Tensor q, k, v;
  };
  // [B, T, heads · head_dim] → [B, heads, T, head_dim]
  torch::Tensor heads(const torch::Tensor& t, int64_t count) const;
  // The projections of x into heads, queries and keys rotated to `angles`' positions.
  Qkv qkv(const torch::Tensor& x, const RotaryAngles& angles);
  torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                       bool causal, const PackedLayout& packed = {});

  int64_t n_head_, n_kv_head_, head_dim_;
  double dropout_;
};
TORCH_MODULE(LlamaAttention);

// down_proj(silu(gate_proj(x)) · up_proj(x)), no biases.
class LlamaMlpImpl : public torch::nn::Module {
 public:
  explicit LlamaMlpImpl(const LlamaDims& dims);
  torch::Tensor forward(const torch::Tensor& x);

  torch::nn::Linear gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};
  c10::intrusive_ptr<precision::Fp8Linear> fp8_gate, fp8_up, fp8_down;
};
TORCH_MODULE(LlamaMlp);

// x + attn(input_layernorm(x)), then + mlp(post_attention_layernorm(·)).
class LlamaBlockImpl : public torch::nn::Module {
 public:
  explicit LlamaBlockImpl(const LlamaDims& dims);
  torch::Tensor forward(const torch::Tensor& x, const RotaryAngles& angles,
                        const PackedLayout& packed = {});
  torch::Tensor forward_cached(const torch::Tensor& x, const RotaryAngles& angles,
                               std::pair<torch::Tensor, torch::Tensor>& cache);

  RmsNorm input_layernorm{nullptr};
  LlamaAttention self_attn{nullptr};
  RmsNorm post_attention_layernorm{nullptr};
  LlamaMlp mlp{nullptr};
};
TORCH_MODULE(LlamaBlock);

class LlamaImpl : public torch::nn::Module {
 public:
  // transformers' initialisation: Linear and Embedding weights normal(0, 0.02), biases 0, norms 1.
  explicit LlamaImpl(const LlamaDims& dims);

  // tokens [B, T], T ≤ block_size → logits [B, T, vocab_size].
  torch::Tensor forward(const torch::Tensor& tokens);
  // The mean next-token cross-entropy against targets [B, T]: the head and the loss fused,
  // chunk by chunk (kernels/fused_classifier.h), unless set_fused(false). `positions` [B, T]
  // (packed examples, data::Batch, with their cumulative lengths `starts`) restart at 0 for each
  // example, which attends only within itself.
  torch::Tensor loss(const torch::Tensor& tokens, const torch::Tensor& targets,
                     const torch::Tensor& positions = {}, const torch::Tensor& starts = {});
  // Generation: the logits [B, vocab_size] of the position after `tokens`, which follow the
  // cache's positions; the cache grows by T. Throws RuntimeError past block_size.
  torch::Tensor next_logits(const torch::Tensor& tokens, KvCache& cache);

  const LlamaDims& dims() const { return dims_; }
  void set_grad_ckpt(bool enabled) { grad_ckpt_ = enabled; }
  void set_fused(bool fused) { fused_ = fused; }
  // Runs every block through `hooks` from now on (nullptr: none).
  void set_block_hooks(BlockHooks* hooks) { block_hooks_ = hooks; }
  std::vector<std::string> block_names() const;
  // Each block's q/k/v/o and gate/up/down projections ("layers.3.mlp.up_proj"), then "head"
  // when the fused loss computes it and vocab_size is a multiple of 16.
  std::vector<precision::Fp8Candidate> fp8_candidates() const;
  void enable_fp8(const precision::Fp8Recipe& recipe, const precision::Fp8Selected& selected);

 private:
  torch::Tensor hidden(const torch::Tensor& tokens, const torch::Tensor& positions,
                       const torch::Tensor& starts);
  // The rotary frequencies on `device`, where the rotary angles are worked out.
  const torch::Tensor& inv_freq_on(const torch::Device& device);
  // The head's weight: lm_head's, or embed_tokens' when tied.
  torch::Tensor head_weight() const;
  const torch::nn::Module& head_module() const;

  LlamaDims dims_;
  bool grad_ckpt_ = false;
  bool fused_ = true;
  bool fp8_head_ = false;
  BlockHooks* block_hooks_ = nullptr;
  torch::Tensor inv_freq_;  // not a parameter nor a buffer: derived from dims, on the last device used
  torch::nn::Embedding embed_tokens_{nullptr};
  torch::nn::ModuleList layers_;
  RmsNorm norm_{nullptr};
  torch::nn::Linear lm_head_{nullptr};  // none when tied
};
TORCH_MODULE(Llama);

}  // namespace ampt::models

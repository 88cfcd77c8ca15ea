// A GPT-2 style decoder-only transformer language model.
#pragma once

#include "ampt/models/attention.h"
#include "ampt/models/gpt_presets.h"
#include "ampt/models/block_hooks.h"
#include "ampt/models/kv_cache.h"

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <string>
#include <utility>
#include <vector>

namespace ampt::models {

// The position-wise feed-forward of a block: n_embd → 4·n_embd → GELU → n_embd.
class GptMlpImpl : public torch::nn::Module {
 public:
  GptMlpImpl(int64_t n_embd, double dropout, bool tanh_gelu);
  torch::Tensor forward(const torch::Tensor& x);

  torch::nn::Linear c_fc{nullptr};
  torch::nn::Linear c_proj{nullptr};  // a residual projection: GPT-2 scales its init

  // Runs c_fc and c_proj in fp8 from now on where `selected` names them (prefix + "c_fc").
  void enable_fp8(const precision::Fp8Recipe& recipe, const precision::Fp8Selected& selected,
                  const std::string& prefix);
  // Whether c_fc, the GELU and c_proj run as one operation: in the autocast dtype, one that
  // recomputes the GELU's output in backward rather than keeping it (kernels/gelu_mlp.h; not with
  // fp32 islands), and that may use the GEMM epilogues where they apply (`epilogues`); with both
  // Linears in fp8 and the tanh GELU, one whose casts compute the GELU and its gradient
  // (precision/fp8_mlp.h).
  void set_fused(bool fused, bool epilogues) {
    fused_ = fused;
    epilogues_ = epilogues;
  }

 private:
  bool fused_ = true;
  bool epilogues_ = true;
  c10::intrusive_ptr<precision::Fp8Linear> fp8_fc_;
  c10::intrusive_ptr<precision::Fp8Linear> fp8_proj_;
  torch::nn::Dropout dropout_{nullptr};
  std::string gelu_approximate_;  // "tanh" (GPT-2's) or "none"
};
TORCH_MODULE(GptMlp);

// Pre-LayerNorm block: x + attn(ln_1(x)), then x + mlp(ln_2(x)).
class GptBlockImpl : public torch::nn::Module {
 public:
  explicit GptBlockImpl(const GptDims& dims);
  torch::Tensor forward(const torch::Tensor& x, const PackedLayout& packed = {});
  // forward for new positions, attending through `cache` (CausalSelfAttention::forward_cached).
  torch::Tensor forward_cached(const torch::Tensor& x, std::pair<torch::Tensor, torch::Tensor>& cache);

  torch::nn::LayerNorm ln_1{nullptr};
  CausalSelfAttention attn{nullptr};
  torch::nn::LayerNorm ln_2{nullptr};
  GptMlp mlp{nullptr};
};
TORCH_MODULE(GptBlock);

// Token + position embeddings, n_layer blocks, a final LayerNorm, and a head that reuses the
// token embedding matrix (weight tying, as GPT-2): there is no separate head parameter, so the
// optimizer, the parameter count and the weight decay see the shared matrix once.
// Parameter names follow nanoGPT's (wte, wpe, h.N.attn.c_attn, ..., ln_f) without "transformer.".
class GptImpl : public torch::nn::Module {
 public:
  // GPT-2 initialisation: weights normal(0, 0.02), the residual projections (attn.c_proj,
  // mlp.c_proj) normal(0, 0.02/sqrt(2·n_layer)) so the residual stream's variance does not grow
  // with depth, biases 0, LayerNorm weight 1 and bias 0.
  explicit GptImpl(const GptDims& dims);

  // tokens: [B, T] int64 with T ≤ block_size → logits [B, T, real vocabulary] (vocab_size
  // less its padding rows, which are not classes).
  torch::Tensor forward(const torch::Tensor& tokens);
  // The mean cross-entropy of the next-token targets [B, T] without forming the logits whole:
  // the head and the loss run fused, chunk by chunk (kernels/fused_classifier.h), unless
  // set_fused(false) asks for the plain logits and cross_entropy. `positions` [B, T] (defined
  // for packed examples, data::Batch, with their cumulative lengths `starts`) restart at 0 for
  // each example, which attends only within itself.
  torch::Tensor loss(const torch::Tensor& tokens, const torch::Tensor& targets,
                     const torch::Tensor& positions = {}, const torch::Tensor& starts = {});
  // The fused kernels (--fused_kernels): the head with the loss, and also each residual add
  // with the LayerNorm after it (kernels/add_layer_norm.h; not with fp32 islands or activation
  // checkpointing, whose units are whole modules and blocks) and each MLP as one operation
  // (GptMlpImpl::set_fused), with the GEMM epilogues there and in the attention's Linears
  // (kernels/fused_linear.h) unless `epilogues` is false (--gemm_epilogues).
  void set_fused(bool fused, bool epilogues = true);
  // Generation: the logits [B, real vocabulary] of the position after `tokens` [B, T_new], which
  // follow the cache's positions (the whole prompt into an empty cache, then one token at a
  // time); the cache grows by T_new. Throws RuntimeError past the context block_size.
  torch::Tensor next_logits(const torch::Tensor& tokens, KvCache& cache);

  const GptDims& dims() const { return dims_; }

  // Activation checkpointing: while training with grad mode on, each block keeps only its input
  // and is recomputed in backward (models/activation_checkpoint.h). Off by default.
  void set_grad_ckpt(bool enabled) { grad_ckpt_ = enabled; }
  // Runs every block through `hooks` from now on (nullptr: none). Hooked blocks run one by one:
  // the fused residual adds, which join each block to the next one's LayerNorm, are left out.
  void set_block_hooks(BlockHooks* hooks) { block_hooks_ = hooks; }
  std::vector<std::string> block_names() const;
  // The Linear layers that can run in fp8, in order: each block's attn.c_attn, attn.c_proj,
  // mlp.c_fc and mlp.c_proj ("h.3.mlp.c_fc"), then "head" (the tied wte as the classifier) when
  // the fused loss computes it and vocab_size is a multiple of 16 (fp8 GEMM tiles).
  std::vector<precision::Fp8Candidate> fp8_candidates() const;
  // The candidates `selected` names run in fp8 from now on; the rest, the embeddings, norms and
  // attention stay in the autocast dtype. The head runs in fp8 in the training loss only (its
  // logits for generation stay in the autocast dtype).
  void enable_fp8(const precision::Fp8Recipe& recipe, const precision::Fp8Selected& selected);

 private:
  // The final LayerNorm's output [B, T, n_embd]: what the head reads.
  torch::Tensor hidden(const torch::Tensor& tokens, const torch::Tensor& positions,
                       const torch::Tensor& starts);
  // The blocks and ln_f from the embeddings `x`, each residual add fused with the LayerNorm that
  // follows it (kernels/add_layer_norm.h): the same values as the blocks one by one.
  torch::Tensor fused_blocks(torch::Tensor x, const PackedLayout& packed);
  // wte's rows of real tokens: the head's weight.
  torch::Tensor real_vocab_weight() const;

  GptDims dims_;
  bool grad_ckpt_ = false;
  bool fused_ = true;
  bool fp8_head_ = false;
  BlockHooks* block_hooks_ = nullptr;
  torch::nn::Embedding wte_{nullptr};
  torch::nn::Embedding wpe_{nullptr};
  torch::nn::Dropout drop_{nullptr};
  torch::nn::ModuleList h_;
  torch::nn::LayerNorm ln_f_{nullptr};
};
TORCH_MODULE(Gpt);

}  // namespace ampt::models

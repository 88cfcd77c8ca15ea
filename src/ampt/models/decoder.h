// The decoder skeleton every decoder-only family shares: token embedding (with the family's
// position rule) → blocks, each through the block hooks and activation checkpointing → final norm
// → a head that is a weight the fused loss reads, and the same path with a KV cache for
// generation. A family derives from DecoderImpl, registers its own modules under its own names
// (the checkpoints' names) in its own order, and supplies its block and the hooks below; it
// writes no loop over blocks, loss or generation step of its own.
#pragma once

#include "ampt/models/block_hooks.h"
#include "ampt/models/kv_cache.h"
#include "ampt/models/packed_sequences.h"
#include "ampt/models/rotary.h"

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ampt::models {

// Where a forward's tokens are: positions start .. start + time - 1 of every row, or (packed
// examples) each row's own `per_row` [B, T], each example counting from 0.
struct TokenPositions {
  int64_t start = 0;
  int64_t time = 0;
  torch::Tensor per_row;
  torch::Device device = torch::kCPU;
};

// What every block of one forward reads besides its input: the packed examples, for rotary
// families the angles of the tokens' positions (worked out once per forward), and in a cached
// forward where its new positions go in the cache and which keys they see.
struct BlockContext {
  PackedLayout packed;
  RotaryAngles angles;
  CacheStep cached;
};

// A training loss with the family's auxiliary losses added at their weights, and the figures
// the log shows of them (the family's auxiliary_figure_names; undefined without any).
struct LossTerms {
  torch::Tensor loss;
  torch::Tensor figures;  // [names] float32, detached
};

// What a family adds to the training loss from its blocks' reports: `loss`, weighted (undefined:
// nothing), and the figures of it for the log.
struct AuxiliaryLoss {
  torch::Tensor loss;
  torch::Tensor figures;
};

// A family's block.
class DecoderBlockImpl : public torch::nn::Module {
 public:
  // The block's output [B, T, C], then what it reports beside it for the family's auxiliary
  // loss (a sparse block's router logits; a dense block reports nothing).
  virtual BlockOutputs forward(const torch::Tensor& x, const BlockContext& context) = 0;
  // forward for new positions after those whose keys and values `cache` holds, which it then
  // holds too (the whole prompt into an empty cache, then one position at a time).
  virtual torch::Tensor forward_cached(const torch::Tensor& x, const BlockContext& context,
                                       std::pair<torch::Tensor, torch::Tensor>& cache) = 0;
};

class DecoderImpl : public torch::nn::Module {
 public:
  // `context`: the positions the model holds (block_size); `dropout` > 0 makes activation
  // checkpointing replay the random state.
  DecoderImpl(int64_t context, double dropout) : context_(context), dropout_(dropout) {}

  // tokens [B, T], T ≤ context → logits [B, T, classes].
  torch::Tensor forward(const torch::Tensor& tokens);
  // The same over packed examples: `positions` and `starts` as loss() takes them; where `rows`
  // [N] (indices into the flattened [B·T]) is defined, [N, classes]: the head on those
  // positions alone.
  torch::Tensor logits(const torch::Tensor& tokens, const torch::Tensor& positions,
                       const torch::Tensor& starts, const torch::Tensor& rows = {});
  // The mean next-token cross-entropy against targets [B, T]: the head and the loss fused,
  // chunk by chunk (kernels/fused_classifier.h), unless set_fused(false). `positions` [B, T]
  // (packed examples, data::Batch, with their cumulative lengths `starts`) restart at 0 for each
  // example, which attends only within itself.
  torch::Tensor loss(const torch::Tensor& tokens, const torch::Tensor& targets,
                     const torch::Tensor& positions = {}, const torch::Tensor& starts = {});
  // The same loss with the family's auxiliary losses added, and their figures apart.
  LossTerms loss_terms(const torch::Tensor& tokens, const torch::Tensor& targets,
                       const torch::Tensor& positions = {}, const torch::Tensor& starts = {});
  // The names of LossTerms::figures (empty: the family has no auxiliary loss).
  virtual std::vector<std::string> auxiliary_figure_names() const { return {}; }
  // Generation: the logits [B, classes] of the position after `tokens` [B, T_new], which
  // follow the cache's positions; the cache's buffers (allocated at the first call for its
  // capacity) take T_new more. Rows left-padded to a common length (cache.first) each count their
  // positions from their first real token and attend to no padding, so that a row's logits are
  // those it has alone. Each block runs through its hooks and fp32 island, and the head through
  // its island, as in forward. Throws RuntimeError past the context or the cache's capacity.
  torch::Tensor next_logits(const torch::Tensor& tokens, KvCache& cache);

  int64_t context() const { return context_; }
  // Activation checkpointing: while training with grad mode on, each block keeps only its input
  // and is recomputed in backward (activation_checkpoint.h). Off by default.
  void set_grad_ckpt(bool enabled) { grad_ckpt_ = enabled; }
  // The fused head and loss (and whatever fused_blocks fuses) on or off.
  void set_fused(bool fused) { fused_ = fused; }
  // Runs every block through `hooks` from now on (nullptr: none). Hooked blocks run one by one.
  void set_block_hooks(BlockHooks* hooks) { block_hooks_ = hooks; }
  // The head in fp8 from now on, in the training loss only (generation's logits stay in the
  // autocast dtype); the blocks' Linear layers take theirs from attach_fp8 (linear.h).
  void set_fp8_head(bool fp8) { fp8_head_ = fp8; }

 protected:
  // The family's parts. `blocks_` is registered by the family under its name ("h", "layers").
  torch::nn::ModuleList blocks_;
  bool fused_ = true;

  // The token embeddings [B, T, C] of `tokens` at `at` (with the family's positions and
  // dropout, if it has them).
  virtual torch::Tensor embed(const torch::Tensor& tokens, const TokenPositions& at) = 0;
  // What the blocks read at `at` (rotary families: the angles).
  virtual BlockContext block_context(const TokenPositions& at, PackedLayout packed) {
    return {std::move(packed), {}, {}};
  }
  // The blocks run as one fused sequence ending in the final norm, where the family has one and
  // can take `x` (GPT's residual adds fused with the next LayerNorm); none: one by one.
  virtual std::optional<torch::Tensor> fused_blocks(const torch::Tensor&, const BlockContext&) {
    return std::nullopt;
  }
  virtual torch::Tensor final_norm(const torch::Tensor& x) = 0;
  // The auxiliary losses of one forward from every block's reports, in block order.
  virtual AuxiliaryLoss auxiliary_loss(const std::vector<torch::Tensor>& /*reports*/) const {
    return {};
  }

  // The head's weight [rows, C] (a padded vocabulary included), its first `classes()` rows the
  // real classes, and the module whose fp32 island (if any) the head shares.
  virtual torch::Tensor head_weight() const = 0;
  virtual int64_t classes() const = 0;
  virtual const torch::nn::Module& head_module() const = 0;
  // The dtype of the embeddings the blocks receive (the packed layout's mask takes it without
  // autocast).
  virtual c10::ScalarType activation_dtype() const = 0;

 private:
  // The final norm's output [B, T, C]: what the head reads; the blocks' reports into
  // `reports` where given.
  torch::Tensor hidden(const torch::Tensor& tokens, const torch::Tensor& positions,
                       const torch::Tensor& starts, std::vector<torch::Tensor>* reports = nullptr);
  // head_weight's rows of real classes.
  torch::Tensor class_weight() const;
  // The logits of the real classes from the final norm's output, through the head's island.
  torch::Tensor head(const torch::Tensor& h) const;

  int64_t context_;
  double dropout_;
  bool grad_ckpt_ = false;
  bool fp8_head_ = false;
  BlockHooks* block_hooks_ = nullptr;
};

}  // namespace ampt::models

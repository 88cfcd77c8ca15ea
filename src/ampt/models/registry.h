// Builds the model named by the configuration for the data it will train on.
#pragma once

#include "ampt/config/config.h"
#include "ampt/data/dataset.h"
#include "ampt/data/sample_request.h"
#include "ampt/models/block_hooks.h"
#include "ampt/models/decoder.h"
#include "ampt/models/kv_cache.h"
#include "ampt/models/layer_inventory.h"
#include "ampt/precision/fp8_layers.h"

#include <torch/nn/module.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace ampt::models {

// A model as the trainer sees it: parameters to optimise, a forward to logits, and what the
// startup block and the throughput figures need to know about it.
struct Model {
  std::shared_ptr<torch::nn::Module> module;
  // Classifiers: inputs [B, sample_shape...] → [B, classes]. Language models: tokens [B, T] →
  // [B, T, vocab_size]. The loss is cross_entropy(logits.flatten(0, -2), targets.flatten()).
  std::function<torch::Tensor(const torch::Tensor&)> forward;
  // The training loss of a batch, the mean over its scored targets: cross_entropy of forward's
  // logits, or for a transformer the fused head and loss that never hold the logits whole
  // (config.fused_kernels), over packed examples where the batch has positions.
  std::function<torch::Tensor(const data::Batch&)> loss;
  // Families whose loss includes auxiliary losses (a sparse model's load balancing): the same
  // loss with their figures apart, for the log, and the figures' names; null otherwise.
  std::function<LossTerms(const data::Batch&)> loss_terms;
  std::vector<std::string> loss_figures;
  // Transformers: the logits [B, T, vocab] of a batch, packed examples included (the preference
  // losses read them); [N, vocab] of the positions batch.logit_rows names, where it does (GRPO).
  std::function<torch::Tensor(const data::Batch&)> logits;
  // Training FLOPs (forward + backward) of one sample at the data's shape, for MFU: 6 per
  // multiply-accumulate for the MLP and the CNN, llm.c's GPT formula times T for a GPT
  // (flops.h). The optimizer step is not included.
  int64_t flops_per_sample = 0;
  int64_t tokens_per_sample = 1;  // T for a language model, 1 for a classifier
  std::string architecture;       // the resolved dimensions, e.g. "n_layer 12, n_embd 768, ..."
  // Transformers: the blocks and their Linear layers (layer_inventory.h), the same list the
  // family gives the memory estimate. ZeRO-3 gathers block by block (none: it cannot); fp8 runs
  // the layers it selects among the inventory's candidates (fp8_candidates) through attach_fp8
  // (linear.h), and the head through `set_fp8_head`.
  LayerInventory layers;
  std::function<void(bool fp8)> set_fp8_head;
  // Families that generate: the logits [B, vocab] of the position after `tokens` [B, T_new],
  // which follow the cache's positions (kv_cache.h), and the positions the context holds.
  std::function<torch::Tensor(const torch::Tensor&, KvCache&)> next_logits;
  int64_t context = 0;
  // Transformers: the switch that runs the blocks (layers.blocks) through per-block hooks from
  // then on (block_hooks.h; nullptr: none).
  std::function<void(BlockHooks*)> set_block_hooks;
  // Transformers: the fused kernels on or off from then on (--fused_kernels auto decides after
  // the model is built; nullptr: the family has none).
  std::function<void(bool fused)> set_fused;
};

// What the configured model consumes, for the data layer: token windows of the GPT's resolved
// block_size over its vocab_size, feature vectors (mlp) or images (cnn). Throws UsageError for
// an unknown model, a GPT's inconsistent dimensions, and language-model data (text:, tokens:)
// given to a model that is not a language model.
data::SampleRequest sample_request(const config::Config& config);

// Builds the configured model with its parameters initialised from the torch seed that the
// caller set, so the same seed always gives the same weights. Throws UsageError (one line) when
// the model cannot take this data (wrong task or sample rank, a vocabulary or token block larger
// than a GPT's vocab_size or block_size) or its settings are inconsistent, and when grad_ckpt or
// mixed_precision fp8 is asked of a model without transformer blocks or, for fp8, whose matmul dimensions
// (n_embd, batch_size × tokens) are not multiples of 16. A GPT is built with config.grad_ckpt.
Model make_model(const config::Config& config, const data::DataSpec& spec);

// The model's parameters, an expert group that expert parallelism divides counted whole.
int64_t parameter_count(const torch::nn::Module& module);

}  // namespace ampt::models

// Training memory estimated from a model's dimensions (models/model_dims.h), without building
// it: weights, gradients, master weights, optimizer state, per-op cast copies and saved
// activations, for each precision and opt level, with and without activation checkpointing, and
// each rank's share under ZeRO. `ampt recommend` plans with it (memory_plan.h).
#pragma once

#include "ampt/config/config.h"
#include "ampt/models/model_dims.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace ampt::plan {

using models::ModelDims;
using models::Precision;
using models::Scheme;

struct ParameterCounts {
  int64_t total = 0;           // equals models::parameter_count of the built model
  // What the optimizer steps: `total`, or with LoRA the adapters' A and B, r·(in + out) per
  // adapted layer; the rest (total - trainable) is the frozen base.
  int64_t trainable = 0;
  // Of the base, as below: LoRA adapters are in none of them.
  int64_t matmul_weights = 0;  // weights of linear layers and convolutions (the head included)
  int64_t norm = 0;            // LayerNorm / BatchNorm weights and biases (fp32 under O2)
  int64_t fp8_linear_weights = 0;  // GPT block Linear weights (the ones fp8 runs in e4m3)
};
ParameterCounts count_parameters(const ModelDims& dims);

const std::vector<Scheme>& memory_schemes();
// fp8 runs only a transformer's Linear layers in fp8, and not over a quantized LoRA base.
bool scheme_applies(const Scheme& scheme, const ModelDims& dims);

// Bytes at the training step's peak (the loss's backward), at one micro-batch size.
// Bytes in GiB, as the estimates are printed.
inline double gib(int64_t bytes) { return static_cast<double>(bytes) / static_cast<double>(1 << 30); }

struct MemoryEstimate {
  int64_t weights = 0;
  // LoRA: the part of `weights` that is the frozen base, held in the precision's half dtype
  // (bf16 for fp8) except its norms, in fp32 for fp32/O0.
  int64_t frozen_weights = 0;
  // dpo and ipo full fine-tuning, and grpo's with beta > 0: the part of `weights` that is the
  // frozen reference copy.
  int64_t reference_weights = 0;
  int64_t gradients = 0;
  int64_t masters = 0;      // O2: fp32 master weights
  int64_t optimizer = 0;    // AdamW: two fp32 moments; SGD: one momentum buffer
  int64_t cast_copies = 0;  // O1: the half (fp8: e4m3) copies of matmul weights autocast makes
  int64_t activations = 0;  // saved for backward, plus the loss's transient
  int64_t activations_checkpointed = -1;  // with --grad_ckpt (GPT blocks); -1: not applicable
  // O2: the fp32 master gradients, made from the half ones at the optimizer step, when the
  // activations are gone, and released after it.
  int64_t step_transient = 0;
  // --objective grpo: the sampler's, between the steps, when no activations are held: the KV
  // cache of every completion sampled at once and the decode step's logits with their copies
  // for the draw.
  int64_t sampler = 0;
  // Under ZeRO (shard_memory): the part of persistent() that is this rank's 1/N slices (the fp32
  // master shard, the optimizer state's and the fp32 gradient shard), which more ranks shrink;
  // the rest is the same on any number of ranks.
  int64_t sharded = 0;
  int64_t persistent() const { return weights + gradients + masters + optimizer + cast_copies; }
  int64_t total() const { return persistent() + std::max({activations, step_transient, sampler}); }
  int64_t total_checkpointed() const {
    return activations_checkpointed < 0
               ? -1
               : persistent() + std::max({activations_checkpointed, step_transient, sampler});
  }
};
MemoryEstimate estimate_memory(const ModelDims& dims, const Scheme& scheme,
                               config::OptimizerKind optimizer, double momentum,
                               int64_t micro_batch);

// Data parallelism over `world_size` ranks with ZeRO stage `zero_stage` (0 to 3).
struct Sharding {
  int64_t world_size = 1;
  int64_t zero_stage = 0;
  // Stage 3: bytes per element of the blocks' Linear weights and biases as gathered
  // (--param_dtype: 4 fp32, 2 bf16/fp16); 0: the scheme's compute dtype (--param_dtype auto).
  int64_t param_bytes = 0;
  // Stage 3: bytes per element of a block's gradients in flight to the reduce-scatter
  // (--reduce_dtype: 4 fp32, 2 bf16); 0: the gradients' own dtype (--reduce_dtype grad).
  int64_t reduce_bytes = 0;
  // Expert parallelism (the model's dims then hold one rank's share of the experts): its expert
  // gradients are all-reduced in place among the replicas, never copied into the buckets, and
  // ZeRO's shards leave them out: each rank keeps its share whole, with its gradients and
  // optimizer state.
  int64_t expert_parallel = 1;
  bool active() const { return world_size > 1; }
};
// scheme_applies, and what the sharding allows: O2 beside ZeRO and expert parallelism is refused
// (train/train_state.h's check_train_state).
bool scheme_runs(const Scheme& scheme, const ModelDims& dims, const Sharding& sharding);

// ZeRO-3's partition of the trained parameters: the root (everything outside the transformer
// blocks `h.N` / `layers.N`: embeddings, final norm, an untied head), which stays gathered for
// the whole step, and the blocks, gathered at most two at a time. MLPs and CNNs have no blocks:
// everything is the root. With LoRA the trained parameters are the adapters (all in blocks for
// the usual targets); the frozen base is no part of them and stays whole on every rank.
struct BlockSplit {
  int64_t blocks = 0;                // transformer blocks; 0: none
  int64_t block_linear = 0;          // one block's Linear weights and biases (LoRA: adapters)
  int64_t block_linear_weights = 0;  // of those, the matmul weights (the ones O1 casts)
  int64_t block_norm = 0;            // one block's norm weights and biases
  // The largest block's expert weights (a sparse block's stacks; LoRA: none trained), gathered
  // in their own dtype with the block, and all blocks' together.
  int64_t block_experts = 0;
  int64_t experts = 0;
  int64_t root = 0;                  // trained parameters outside the blocks
  int64_t root_norm = 0;             // of those, the final norm's
};
BlockSplit split_blocks(const ModelDims& dims);

// One rank's share of `whole` (one process's estimate in `scheme`) as ampt trains it: on several
// ranks stages 0 and 1 keep a copy of every gradient in the 25 MiB all-reduce buckets; stage 1
// shards the optimizer state and keeps an fp32 master shard (O2's masters, sharded; below O2 a
// copy of the rank's slice of the weights) and an fp32 gradient shard beside the whole
// gradients; stage 2 keeps only the gradient shard (each bucket's gradients live until it is
// reduce-scattered: a few 25 MiB buckets, not counted). Weights and activations stay whole.
// Stage 3 also shards the weights: the fp32 master shard is all a rank keeps of them between
// uses, and whole weights exist only for the root (in the dtype the unsharded run holds it in)
// and the two blocks gathered at a time (see shard_memory's body for the dtypes); whole
// gradients only for the root and the two blocks whose gradients are in flight to the
// reduce-scatter. Activations stay whole. With LoRA the gradients, masters and optimizer state
// are the adapters' only, and so are the shards.
MemoryEstimate shard_memory(const MemoryEstimate& whole, const ModelDims& dims,
                            const Scheme& scheme, const Sharding& sharding);

}  // namespace ampt::plan

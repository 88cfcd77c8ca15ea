// The keys and values a language model has computed so far in generation, in buffers allocated
// once for every position the generation reaches and written in place, and the attention of new
// positions over them: the one place cached decoding attends; beside it the causal attention of
// an uncached forward, so that exact mode's two share one kernel.
#pragma once

#include "ampt/models/attention_spec.h"

#include <torch/types.h>

#include <cstdint>
#include <utility>
#include <vector>

namespace ampt::models {

struct KvCache {
  // One (keys, values) pair per block, [B, key/value heads, capacity, head_dim] each, allocated
  // at the first write (undefined before) in the dtype the keys come in.
  std::vector<std::pair<torch::Tensor, torch::Tensor>> layers;
  int64_t length = 0;    // positions written
  int64_t capacity = 0;  // positions the buffers are allocated for; 0: the model's whole context
  // Left-padded rows: [B] int64 on the tokens' device, each row's first real position. A row's
  // positions (rotary angles, position embeddings) count from 0 there, and no position attends
  // to the padding before it. Undefined: every row starts at position 0.
  torch::Tensor first;
};

// What the blocks of one cached forward share: where its new positions go and what each sees.
struct CacheStep {
  int64_t held = 0;      // positions the cache held before this forward
  int64_t capacity = 0;  // positions a layer's buffers are allocated for
  // [B or 1, 1, T_new, held + T_new] bool, true where a new position may attend to a key.
  // Undefined: causal within the new positions when the cache was empty, else every key held
  // (one new position).
  torch::Tensor mask;
  // KvCache::first: where each row's keys begin (undefined: at 0). Exact mode's attention reads
  // this instead of the mask.
  torch::Tensor first;
};

// Writes k and v [B, kv heads, T_new, head_dim] at positions [held, held + T_new) of `layer`
// (allocating its buffers for step.capacity positions at the first write) and attends q [B,
// heads, T_new, head_dim] (heads a multiple of kv heads: grouped-query attention) over every
// position held, as step.mask allows → [B, heads, T_new, head_dim]; in exact mode
// (kernels/batch_invariant.h) by invariant_causal_attention from each row's step.first, the
// arithmetic of the training forward's attention. A query sees only the keys within spec's
// window of it. Throws RuntimeError past the buffers' capacity.
torch::Tensor cached_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v,
                               std::pair<torch::Tensor, torch::Tensor>& layer,
                               const CacheStep& step, const AttentionSpec& spec = {});

// The causal attention of a forward without a cache (training, evaluation): q [B, heads, T, D]
// over k and v [B, kv heads, T, D], each position attending to itself and those before it
// (within spec's window of it), with attention `dropout`: SDPA's (is_causal, which lets it pick
// flash attention on a GPU; a window FlashAttention's own on a GPU in half precision, else SDPA
// with a banded mask), or in exact mode invariant_causal_attention, as cached_attention computes
// the same positions. Exact mode has no attention dropout: throws UsageError for dropout > 0 there.
torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, double dropout, const AttentionSpec& spec = {});

}  // namespace ampt::models

// How a layer's attention differs from full causal attention, declared once per layer by its
// family and read by every path that attends (the uncached forward, packed examples, the KV
// cache, exact mode's kernel), and the masks and FlashAttention calls those paths share.
#pragma once

#include <torch/types.h>

#include <cstdint>

namespace ampt::models {

struct AttentionSpec {
  // Sliding-window attention (Mistral's, Qwen2's sliding layers): a query attends to itself and
  // the window - 1 positions before it, as transformers' sliding_window masks. 0: to every
  // position before it.
  int64_t window = 0;

  // Whether a query at a position this far into its sequence or past it sees fewer keys than
  // full causal attention would.
  bool limits(int64_t positions) const { return window > 0 && positions > window; }
};

// [1, 1, queries_end - queries_begin, keys] bool, true where query position p (one of
// [queries_begin, queries_end)) may attend to key position j of [key_offset, key_offset + keys):
// j ≤ p, and within spec's window of p.
torch::Tensor causal_band(int64_t queries_begin, int64_t queries_end, int64_t key_offset,
                          int64_t keys, const AttentionSpec& spec, const torch::Device& device);

// Whether FlashAttention's own kernels (with their windows and variable lengths) run on `device`
// in `dtype`: on a GPU, in bfloat16 or float16; for q and k, both of that one dtype.
bool flash_attention_runs(const c10::Device& device, c10::ScalarType dtype);
bool flash_attention_runs(const torch::Tensor& q, const torch::Tensor& k);

// Causal FlashAttention of q [B, heads, T, D] over k and v [B, kv heads, T, D] within spec's
// window → [B, heads, T, D]; with `cumulative_lengths` (int32 [examples + 1], starts in the
// flattened batch, then B·T) each example on its own, as packed_attention's.
torch::Tensor flash_causal_attention(const torch::Tensor& q, const torch::Tensor& k,
                                     const torch::Tensor& v, const torch::Tensor& cumulative_lengths,
                                     double dropout, const AttentionSpec& spec);

}  // namespace ampt::models

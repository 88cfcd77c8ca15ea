// Packed sequences: several examples in one window of tokens (data::Batch::positions), each
// attending only to earlier tokens of its own example, as if it had a window to itself. On a GPU
// in bf16/fp16 the attention is FlashAttention's variable-length path over the examples'
// cumulative lengths (what transformers' flash_attention_2 does with position_ids); elsewhere
// SDPA with a block-diagonal causal mask.
#pragma once

#include "ampt/models/attention_spec.h"

#include <torch/types.h>

#include <cstdint>

namespace ampt::models {

// How the rows of a batch are cut into examples; empty (undefined tensors) for one causal
// sequence per row.
struct PackedLayout {
  torch::Tensor positions;  // [B, T] int64: each example counts from 0
  // [B, 1, T, T] bool, true where query i may attend to key j (j <= i, same example): SDPA's.
  torch::Tensor mask;
  // The variable-length path's: int32 [runs + 1] starts of the examples in the flattened batch,
  // then B·T (data::Batch::starts); the longest an example can be is T.
  torch::Tensor cumulative_lengths;

  bool packed() const { return positions.defined(); }
};

// The layout of `positions` and their cumulative lengths `starts` (data::Batch) for attention on
// their device, in autocast's dtype where autocast is on there, else in `model_dtype`: the
// variable-length path where it runs (CUDA, bf16/fp16), else the mask. Undefined positions give
// an empty layout.
PackedLayout packed_layout(const torch::Tensor& positions, const torch::Tensor& starts,
                           c10::ScalarType model_dtype);

// Causal self-attention within each example of `layout`: q [B, heads, T, head_dim], k and v
// [B, kv_heads, T, head_dim] (kv_heads dividing heads: grouped-query attention) → [B, heads, T,
// head_dim], with attention dropout `dropout`, within spec's window.
torch::Tensor packed_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const PackedLayout& layout, double dropout,
                               const AttentionSpec& spec = {});

}  // namespace ampt::models

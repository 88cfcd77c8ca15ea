// Rotary position embeddings (RoPE) as Hugging Face's Llama computes them: each head's dimension
// pairs (i, i + d/2) rotated by position · inv_freq[i], with Llama-3's wavelength stretch when
// the model has one. The angles are worked out in float32 whatever the autocast dtype, then
// cast to the dtype of the queries and keys they rotate, as transformers does.
#pragma once

#include "ampt/models/llama_presets.h"

#include <torch/types.h>

namespace ampt::models {

// The rotation frequencies [head_dim / 2], float32 on the CPU: 1 / theta^(2i / head_dim), then
// Llama-3's stretch (transformers' _compute_llama3_parameters).
torch::Tensor rope_inv_freq(const LlamaDims& dims);

struct RotaryAngles {
  torch::Tensor cos, sin;  // [T, head_dim], float32
};

// The angles of positions [start, start + length) on `inv_freq`'s device.
RotaryAngles rotary_angles(const torch::Tensor& inv_freq, int64_t start, int64_t length);
// The angles of each row's own positions [B, T] (packed examples, each counting from 0):
// cos and sin [B, 1, T, head_dim], the same values as the range's at the same positions.
RotaryAngles rotary_angles(const torch::Tensor& inv_freq, const torch::Tensor& positions);

// x [B, heads, T, head_dim] rotated: x·cos + rotate_half(x)·sin, in x's dtype.
torch::Tensor apply_rotary(const torch::Tensor& x, const RotaryAngles& angles);

}  // namespace ampt::models

#include "ampt/models/packed_sequences.h"

#include "ampt/core/autocast_dtype.h"
#include "ampt/core/errors.h"
#include "ampt/kernels/batch_invariant.h"

#include <ATen/ops/scaled_dot_product_attention.h>

namespace ampt::models {
namespace {

// Example ids [B, T]: a row's examples numbered from 0, a new one wherever the position is 0.
torch::Tensor example_ids(const torch::Tensor& positions) {
  return positions.eq(0).cumsum(1);
}

torch::Tensor example_mask(const torch::Tensor& positions) {
  const auto ids = example_ids(positions);
  const int64_t time = positions.size(1);
  return ids.unsqueeze(2).eq(ids.unsqueeze(1)).unsqueeze(1).logical_and_(
      causal_band(0, time, 0, time, {}, positions.device()));
}

}  // namespace

PackedLayout packed_layout(const torch::Tensor& positions, const torch::Tensor& starts,
                           c10::ScalarType model_dtype) {
  PackedLayout layout;
  if (!positions.defined()) return layout;
  layout.positions = positions;
  const auto dtype = autocast_dtype(positions.device().type()).value_or(model_dtype);
  if (flash_attention_runs(positions.device(), dtype) && starts.defined()) {
    layout.cumulative_lengths = starts.to(positions.device(), torch::kInt32);
  } else {
    layout.mask = example_mask(positions);
  }
  return layout;
}

torch::Tensor packed_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const PackedLayout& layout, double dropout,
                               const AttentionSpec& spec) {
  if (kernels::batch_invariant()) {
    throw UsageError("exact mode's attention takes one sequence a row, and this forward packs examples "
                     "into rows: turn packing off for it");
  }
  if (layout.cumulative_lengths.defined() && flash_attention_runs(q, k)) {
    return flash_causal_attention(q, k, v, layout.cumulative_lengths, dropout, spec);
  }
  // An fp32 island inside a half run: the mask the layout did not need until now.
  auto mask = layout.mask.defined() ? layout.mask : example_mask(layout.positions);
  const int64_t time = q.size(2);
  // Positions within an example are consecutive, so the window is one over the row's.
  if (spec.limits(time)) mask = mask.logical_and(causal_band(0, time, 0, time, spec, q.device()));
  return at::scaled_dot_product_attention(q, k, v, mask, dropout, /*is_causal=*/false,
                                          /*scale=*/std::nullopt,
                                          /*enable_gqa=*/k.size(1) != q.size(1));
}

}  // namespace ampt::models

#include "ampt/models/packed_sequences.h"

#include "ampt/core/autocast_dtype.h"
#include "ampt/core/errors.h"
#include "ampt/kernels/batch_invariant.h"

#include <ATen/ops/_flash_attention_forward.h>
#include <ATen/ops/scaled_dot_product_attention.h>

namespace ampt::models {
namespace {

bool varlen_runs(const c10::Device& device, c10::ScalarType dtype) {
  return device.is_cuda() && (dtype == torch::kBFloat16 || dtype == torch::kHalf);
}

// Example ids [B, T]: a row's examples numbered from 0, a new one wherever the position is 0.
torch::Tensor example_ids(const torch::Tensor& positions) {
  return positions.eq(0).cumsum(1);
}

torch::Tensor example_mask(const torch::Tensor& positions) {
  const auto ids = example_ids(positions);
  const int64_t time = positions.size(1);
  const auto causal = torch::ones({time, time}, positions.options().dtype(torch::kBool)).tril();
  return ids.unsqueeze(2).eq(ids.unsqueeze(1)).logical_and_(causal).unsqueeze(1);
}

}  // namespace

PackedLayout packed_layout(const torch::Tensor& positions, const torch::Tensor& starts,
                           c10::ScalarType model_dtype) {
  PackedLayout layout;
  if (!positions.defined()) return layout;
  layout.positions = positions;
  const auto dtype = autocast_dtype(positions.device().type()).value_or(model_dtype);
  if (varlen_runs(positions.device(), dtype) && starts.defined()) {
    layout.cumulative_lengths = starts.to(positions.device(), torch::kInt32);
  } else {
    layout.mask = example_mask(positions);
  }
  return layout;
}

torch::Tensor packed_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const PackedLayout& layout, double dropout) {
  const int64_t batch = q.size(0), heads = q.size(1), time = q.size(2), width = q.size(3);
  if (kernels::batch_invariant()) {
    throw UsageError("exact mode's attention takes one sequence a row, and this forward packs examples "
                     "into rows: turn packing off for it");
  }
  if (layout.cumulative_lengths.defined() && varlen_runs(q.device(), q.scalar_type()) &&
      k.scalar_type() == q.scalar_type()) {
    // [B, heads, T, d] → [B·T, heads, d]: the examples end to end, as the kernel reads them.
    const auto tokens = [&](const torch::Tensor& t) {
      return t.transpose(1, 2).reshape({batch * time, t.size(1), width});
    };
    const auto& lengths = layout.cumulative_lengths;
    const auto out = std::get<0>(at::_flash_attention_forward(
        tokens(q), tokens(k), tokens(v), lengths, lengths, time, time, dropout,
        /*is_causal=*/true, /*return_debug_mask=*/false));
    return out.view({batch, time, heads, width}).transpose(1, 2);
  }
  // An fp32 island inside a half run: the mask the layout did not need until now.
  const auto mask = layout.mask.defined() ? layout.mask : example_mask(layout.positions);
  return at::scaled_dot_product_attention(q, k, v, mask, dropout, /*is_causal=*/false,
                                          /*scale=*/std::nullopt,
                                          /*enable_gqa=*/k.size(1) != heads);
}

}  // namespace ampt::models

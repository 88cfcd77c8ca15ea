#include "ampt/models/attention_spec.h"

#include <ATen/ops/_flash_attention_forward.h>

#include <optional>

namespace ampt::models {

torch::Tensor causal_band(int64_t queries_begin, int64_t queries_end, int64_t key_offset,
                          int64_t keys, const AttentionSpec& spec, const torch::Device& device) {
  const auto options = torch::dtype(torch::kInt64).device(device);
  const auto query = torch::arange(queries_begin, queries_end, options).view({1, 1, -1, 1});
  const auto key = torch::arange(key_offset, key_offset + keys, options).view({1, 1, 1, keys});
  auto band = key <= query;
  if (spec.window > 0) band.logical_and_(key > query - spec.window);
  return band;
}

bool flash_attention_runs(const c10::Device& device, c10::ScalarType dtype) {
  return device.is_cuda() && (dtype == torch::kBFloat16 || dtype == torch::kHalf);
}

bool flash_attention_runs(const torch::Tensor& q, const torch::Tensor& k) {
  return flash_attention_runs(q.device(), q.scalar_type()) && k.scalar_type() == q.scalar_type();
}

torch::Tensor flash_causal_attention(const torch::Tensor& q, const torch::Tensor& k,
                                     const torch::Tensor& v, const torch::Tensor& cumulative_lengths,
                                     double dropout, const AttentionSpec& spec) {
  const int64_t batch = q.size(0), heads = q.size(1), time = q.size(2), width = q.size(3);
  const bool varlen = cumulative_lengths.defined();
  // [B, heads, T, d] → [B, T, heads, d], or for variable lengths [B·T, heads, d]: the examples
  // end to end, as the kernel reads them.
  const auto tokens = [&](const torch::Tensor& t) {
    const auto rows = t.transpose(1, 2);
    return varlen ? rows.reshape({batch * time, t.size(1), width}) : rows;
  };
  // FlashAttention counts the window past the query itself.
  const auto left = spec.window > 0 ? std::optional<int64_t>(spec.window - 1) : std::nullopt;
  const auto right = spec.window > 0 ? std::optional<int64_t>(0) : std::nullopt;
  const auto lengths = varlen ? std::optional<torch::Tensor>(cumulative_lengths) : std::nullopt;
  const auto out = std::get<0>(at::_flash_attention_forward(
      tokens(q), tokens(k), tokens(v), lengths, lengths, time, time, dropout, /*is_causal=*/true,
      /*return_debug_mask=*/false, /*scale=*/std::nullopt, left, right));
  return out.view({batch, time, heads, width}).transpose(1, 2);
}

}  // namespace ampt::models

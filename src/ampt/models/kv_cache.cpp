#include "ampt/models/kv_cache.h"

#include "ampt/core/errors.h"
#include "ampt/kernels/batch_invariant.h"

#include <ATen/ops/scaled_dot_product_attention.h>
#include <fmt/format.h>

#include <optional>

namespace ampt::models {

torch::Tensor cached_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v,
                               std::pair<torch::Tensor, torch::Tensor>& layer,
                               const CacheStep& step, const AttentionSpec& spec) {
  auto& [keys, values] = layer;
  const int64_t time = k.size(2), end = step.held + time;
  if (!keys.defined()) {
    keys = torch::empty({k.size(0), k.size(1), step.capacity, k.size(3)}, k.options());
    values = torch::empty({v.size(0), v.size(1), step.capacity, v.size(3)}, v.options());
  }
  if (end > keys.size(2)) {
    throw RuntimeError(fmt::format("the KV cache holds {} positions and position {} was to be "
                                   "written: give it the capacity of the prompt and the tokens to "
                                   "generate",
                                   keys.size(2), end));
  }
  keys.narrow(2, step.held, time).copy_(k);
  values.narrow(2, step.held, time).copy_(v);
  // A window reads only the keys its first new position can still see, not the whole cache.
  const int64_t from = spec.limits(step.held + 1) ? step.held + 1 - spec.window : 0;
  const auto held_keys = keys.narrow(2, from, end - from);
  const auto held_values = values.narrow(2, from, end - from);
  if (kernels::batch_invariant()) {
    torch::Tensor first;
    if (step.first.defined()) first = (step.first.to(torch::kCPU) - from).clamp_min(0);
    return kernels::invariant_causal_attention(q, held_keys, held_values, first, std::nullopt,
                                               spec.window);
  }
  torch::Tensor mask = step.mask.defined() ? step.mask.narrow(3, from, end - from) : torch::Tensor();
  if (spec.limits(end)) {
    const auto band = causal_band(step.held, end, from, end - from, spec, q.device());
    mask = mask.defined() ? mask.logical_and(band) : band;
  }
  // is_causal without a mask lets SDPA pick flash attention on a GPU for an unpadded prompt.
  const bool causal = !mask.defined() && step.held == 0 && time > 1;
  return at::scaled_dot_product_attention(q, held_keys, held_values,
                                          mask.defined() ? std::optional<torch::Tensor>(mask)
                                                         : std::nullopt,
                                          /*dropout_p=*/0.0, causal,
                                          /*scale=*/std::nullopt,
                                          /*enable_gqa=*/q.size(1) != k.size(1));
}

torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, double dropout, const AttentionSpec& spec) {
  if (kernels::batch_invariant()) {
    if (dropout > 0.0) {
      throw UsageError(fmt::format("exact mode's attention has no dropout, and attention dropout {} "
                                   "is on while training: set dropout 0 (or --sampler fast)",
                                   dropout));
    }
    return kernels::invariant_causal_attention(q, k, v, {}, std::nullopt, spec.window);
  }
  const int64_t time = q.size(2);
  if (spec.limits(time)) {
    if (flash_attention_runs(q, k)) return flash_causal_attention(q, k, v, {}, dropout, spec);
    return at::scaled_dot_product_attention(q, k, v, causal_band(0, time, 0, time, spec, q.device()),
                                            dropout, /*is_causal=*/false, /*scale=*/std::nullopt,
                                            /*enable_gqa=*/q.size(1) != k.size(1));
  }
  return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, dropout, /*is_causal=*/true,
                                          /*scale=*/std::nullopt, /*enable_gqa=*/q.size(1) != k.size(1));
}

}  // namespace ampt::models

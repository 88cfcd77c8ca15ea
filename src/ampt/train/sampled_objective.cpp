#include "ampt/train/sampled_objective.h"

#include "ampt/data/document_examples.h"
#include "ampt/kernels/fused_classifier.h"
#include "ampt/kernels/token_log_probs.h"

#include <algorithm>

namespace ampt::train {
namespace {

constexpr double kRatioBand = 0.1;  // mismatch/ratio_outside counts ratios outside 1 ± this

}  // namespace

void SampledObjective::begin_rollout(torch::Tensor figures) {
  rollout_figures_ = std::move(figures);
  iteration_ = 0;
}

const std::vector<std::string>& SampledObjective::mismatch_names() {
  static const std::vector<std::string> names{"mismatch/kl", "mismatch/max_abs_logp", "mismatch/ratio_outside"};
  return names;
}

torch::Tensor SampledObjective::log_probs(const torch::Tensor& logits, const data::Batch& batch) const {
  // The sampler's function of the same logits (models::sample): in exact mode the same bits.
  return kernels::token_log_probs(logits.flatten(0, -2), batch.targets.flatten(), 0, temperature_)
      .view(batch.targets.sizes());
}

torch::Tensor SampledObjective::entropies(const torch::Tensor& logits, const data::Batch& batch) const {
  torch::NoGradGuard no_grad;
  const auto rows = logits.flatten(0, -2);
  auto out = torch::empty({rows.size(0)}, rows.options().dtype(torch::kFloat32));
  // Chunk by chunk, as the log-probabilities: the [rows, vocab] softmax never whole in float32.
  const int64_t chunk = kernels::default_chunk_rows(rows.size(1));
  for (int64_t r = 0; r < rows.size(0); r += chunk) {
    const int64_t end = std::min(rows.size(0), r + chunk);
    const auto logp = (rows.slice(0, r, end).to(torch::kFloat32) / temperature_).log_softmax(-1);
    out.slice(0, r, end).copy_(-(logp.exp() * logp).sum(-1));
  }
  return out.view(batch.targets.sizes());
}

void SampledObjective::measure_mismatch(const torch::Tensor& trainer, const data::Batch& batch) {
  torch::NoGradGuard no_grad;
  const auto scored = (batch.targets != data::kIgnoredTarget).to(torch::kFloat32);
  const auto difference = (trainer - batch.sampler_log_probs) * scored;
  const auto ratio = difference.exp();
  const auto tokens = scored.sum().clamp_min(1);
  const auto k3 = ((ratio - 1) - difference) * scored;
  const auto outside = ((ratio - 1).abs() > kRatioBand).to(torch::kFloat32) * scored;
  batch.mismatch.copy_(torch::stack({k3.sum() / tokens, difference.abs().max(), outside.sum() / tokens}));
}

}  // namespace ampt::train

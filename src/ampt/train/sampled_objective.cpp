#include "ampt/train/sampled_objective.h"

#include "ampt/data/document_examples.h"
#include "ampt/kernels/token_log_probs.h"

#include <utility>

namespace ampt::train {
namespace {

constexpr double kRatioBand = 0.1;  // mismatch/ratio_outside counts ratios outside 1 ± this

// [B, T] of the values [N] of the batch's logit rows (every position where it names none), 0
// elsewhere.
torch::Tensor at_positions(const torch::Tensor& values, const data::Batch& batch) {
  if (!batch.logit_rows.defined()) return values.view(batch.targets.sizes());
  return torch::zeros({batch.targets.numel()}, values.options())
      .index_put({batch.logit_rows}, values)
      .view(batch.targets.sizes());
}

// The batch's targets at its logit rows, flat.
torch::Tensor scored_targets(const data::Batch& batch) {
  const auto targets = batch.targets.flatten();
  return batch.logit_rows.defined() ? targets.index_select(0, batch.logit_rows) : targets;
}

}  // namespace

void SampledObjective::begin_rollout(torch::Tensor figures) {
  rollout_figures_ = std::move(figures);
  iteration_ = 0;
}

const std::vector<std::string>& SampledObjective::mismatch_names() {
  static const std::vector<std::string> names{"mismatch/kl", "mismatch/max_abs_logp", "mismatch/ratio_outside"};
  return names;
}

torch::Tensor SampledObjective::log_probs_at(const torch::Tensor& logits, const data::Batch& batch,
                                            double temperature) {
  // The sampler's function of the same logits (models::sample): in exact mode the same bits.
  return at_positions(kernels::token_log_probs(logits.flatten(0, -2), scored_targets(batch), 0, temperature), batch);
}

kernels::LogProbsAndEntropies SampledObjective::log_probs_and_entropies(const torch::Tensor& logits,
                                                                        const data::Batch& batch) const {
  auto both = kernels::token_log_probs_and_entropies(logits.flatten(0, -2), scored_targets(batch), 0, temperature_);
  return {at_positions(both.log_probs, batch), at_positions(both.entropies, batch)};
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

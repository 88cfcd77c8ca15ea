#include "ampt/train/distill_objective.h"

#include "ampt/train/grpo_loss.h"

#include <fmt/format.h>

namespace ampt::train {

DistillObjective::DistillObjective(double temperature, DistillModels models,
                                   std::vector<std::string> rollout_figures)
    : SampledObjective(temperature), models_(std::move(models)) {
  names_ = {"distill/reverse_kl", "entropy"};
  names_.insert(names_.end(), mismatch_names().begin(), mismatch_names().end());
  names_.insert(names_.end(), rollout_figures.begin(), rollout_figures.end());
}

torch::Tensor DistillObjective::units(const data::Batch& batch) const {
  // The token mean over the step, as GRPO's dapo type weighs its micro-batches.
  return grpo::loss_units(grpo::LossType::dapo, batch.completion_mask);
}

ObjectiveLoss DistillObjective::loss(const data::Batch& batch) {
  const auto logits = models_.policy(batch);
  const auto [log_probs_now, entropies] = log_probs_and_entropies(logits, batch);
  measure_mismatch(log_probs_now.detach(), batch);
  torch::Tensor teacher;
  {
    torch::NoGradGuard no_grad;
    teacher = log_probs_at(models_.teacher(batch), batch, 1.0);
  }
  const auto mask = batch.completion_mask.to(torch::kFloat32);
  const auto tokens = mask.sum().clamp_min(1);
  // The negative advantage, detached: neither log-probability carries a gradient.
  const auto reverse_kl = (batch.sampler_log_probs - teacher) * mask;
  const auto ratio = (log_probs_now - batch.sampler_log_probs).exp();
  const auto loss = (reverse_kl * ratio).sum() / tokens;
  // Each figure its mean over this micro-batch times the micro-batch's units: the step divides
  // the sum by the step's units (the rollout's figures then come out as they are).
  const auto units = this->units(batch).to(torch::kFloat32);
  const auto means = torch::stack({reverse_kl.sum() / tokens, (entropies * mask).sum() / tokens});
  auto figures = torch::cat({means, batch.mismatch, rollout_figures_}) * units;
  return {loss, figures.detach()};
}

std::string DistillObjective::describe() const {
  return fmt::format("distill: each sampled token's reverse KL to the teacher as the negative advantage of an "
                     "importance-weighted policy gradient, averaged over the step's completion tokens, {}; "
                     "teacher {}",
                     models_.sampler_description, models_.teacher_description);
}

}  // namespace ampt::train

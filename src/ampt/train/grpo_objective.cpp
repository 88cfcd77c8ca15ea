#include "ampt/train/grpo_objective.h"

#include <fmt/format.h>

namespace ampt::train {
namespace {

std::string_view loss_type_name(grpo::LossType type) {
  switch (type) {
    case grpo::LossType::grpo: return "grpo";
    case grpo::LossType::dr_grpo: return "dr_grpo";
    case grpo::LossType::dapo: return "dapo";
    case grpo::LossType::bnpo: return "bnpo";
  }
  return "?";
}

}  // namespace

GrpoObjective::GrpoObjective(grpo::LossSettings settings, double temperature, GrpoModels models,
                             std::vector<std::string> rollout_figures,
                             std::optional<grpo::SamplerCorrectionSettings> correction)
    : SampledObjective(temperature), settings_(settings), models_(std::move(models)), correction_(correction) {
  names_ = grpo::figure_names(settings_, /*with_entropy=*/true);
  names_.insert(names_.end(), mismatch_names().begin(), mismatch_names().end());
  if (correction_) {
    const auto& sampling = grpo::sampler_figure_names();
    names_.insert(names_.end(), sampling.begin(), sampling.end());
  }
  names_.insert(names_.end(), rollout_figures.begin(), rollout_figures.end());
}

torch::Tensor GrpoObjective::units(const data::Batch& batch) const {
  return grpo::loss_units(settings_.loss_type, batch.completion_mask);
}

ObjectiveLoss GrpoObjective::loss(const data::Batch& batch) {
  const auto logits = models_.policy(batch);
  const auto [log_probs_now, entropies] = log_probs_and_entropies(logits, batch);
  const bool first = iteration_ == 0;
  if (first) {
    torch::NoGradGuard no_grad;
    measure_mismatch(log_probs_now.detach(), batch);
    if (batch.old_log_probs.defined()) batch.old_log_probs.copy_(log_probs_now.detach());
    if (batch.ref_log_probs.defined()) batch.ref_log_probs.copy_(log_probs(models_.reference(batch), batch));
    if (correction_) {
      const auto weights = grpo::sampler_weights(log_probs_now.detach(), batch.sampler_log_probs,
                                                 batch.completion_mask, *correction_);
      batch.sampler_weights.copy_(weights.weights.expand_as(batch.sampler_weights));
      batch.sampler_figures.copy_(weights.figures);
    }
  }
  grpo::LossInputs inputs;
  inputs.log_probs = log_probs_now;
  // The first step is on-policy: the old policy is the forward itself (TRL's detach).
  if (!first) inputs.old_log_probs = batch.old_log_probs;
  inputs.ref_log_probs = batch.ref_log_probs;
  inputs.advantages = batch.advantages;
  inputs.mask = batch.completion_mask;
  inputs.entropies = entropies;
  if (correction_) inputs.sampler_weights = batch.sampler_weights;
  auto terms = grpo::policy_loss(settings_, inputs);
  // Each figure is its mean over this micro-batch, weighted by the micro-batch's units: the step
  // divides the sum by the step's units (the rollout's figures then come out as they are).
  const auto units = this->units(batch).to(torch::kFloat32);
  const auto means = terms.figure_sums / terms.figure_counts.to(torch::kFloat32).clamp_min(1);
  std::vector<torch::Tensor> parts{means, batch.mismatch};
  if (correction_) parts.push_back(batch.sampler_figures);
  parts.push_back(rollout_figures_);
  auto figures = torch::cat(parts) * units;
  return {terms.loss, figures.detach()};
}

std::string GrpoObjective::describe() const {
  std::string clip = settings_.epsilon_high == settings_.epsilon_low
                         ? fmt::format("epsilon {}", settings_.epsilon_low)
                         : fmt::format("epsilon {} / {}", settings_.epsilon_low, settings_.epsilon_high);
  return fmt::format("grpo, loss_type {}, {}, {} importance ratios{}{}", loss_type_name(settings_.loss_type), clip,
                     settings_.importance_sampling_level == grpo::ImportanceLevel::token ? "token" : "sequence",
                     settings_.beta == 0 ? ", no KL (beta 0)"
                                         : fmt::format(", k3 KL beta {} to {}", settings_.beta,
                                                       models_.reference_description),
                     ", " + models_.sampler_description);
}

}  // namespace ampt::train

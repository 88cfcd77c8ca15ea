#include "ampt/train/grpo_objective.h"

#include "ampt/config/enum_names.h"
#include "ampt/data/document_examples.h"
#include "ampt/kernels/token_log_probs.h"

#include <fmt/format.h>

namespace ampt::train {
namespace {

constexpr double kRatioBand = 0.1;  // mismatch/ratio_outside counts ratios outside 1 ± this

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
                             std::vector<std::string> rollout_figures)
    : settings_(settings), temperature_(temperature), models_(std::move(models)) {
  names_ = grpo::figure_names(settings_, /*with_entropy=*/false);
  for (const char* name : {"mismatch/kl", "mismatch/max_abs_logp", "mismatch/ratio_outside"}) names_.emplace_back(name);
  names_.insert(names_.end(), rollout_figures.begin(), rollout_figures.end());
}

void GrpoObjective::begin_rollout(torch::Tensor figures) {
  rollout_figures_ = std::move(figures);
  iteration_ = 0;
}

torch::Tensor GrpoObjective::units(const data::Batch& batch) const {
  return grpo::loss_units(settings_.loss_type, batch.completion_mask);
}

torch::Tensor GrpoObjective::log_probs(const torch::Tensor& logits, const data::Batch& batch) const {
  const auto scaled = temperature_ == 1.0 ? logits : logits / temperature_;
  const auto rows = scaled.flatten(0, -2);
  return kernels::token_log_probs(rows, batch.targets.flatten()).view(batch.targets.sizes());
}

ObjectiveLoss GrpoObjective::loss(const data::Batch& batch) {
  const auto log_probs_now = log_probs(models_.policy(batch), batch);
  const bool first = iteration_ == 0;
  if (first) {
    torch::NoGradGuard no_grad;
    const auto scored = (batch.targets != data::kIgnoredTarget).to(torch::kFloat32);
    const auto difference = (log_probs_now.detach() - batch.sampler_log_probs) * scored;
    const auto ratio = difference.exp();
    const auto tokens = scored.sum().clamp_min(1);
    const auto k3 = ((ratio - 1) - difference) * scored;
    const auto outside = ((ratio - 1).abs() > kRatioBand).to(torch::kFloat32) * scored;
    batch.mismatch.copy_(torch::stack({k3.sum() / tokens, difference.abs().max(), outside.sum() / tokens}));
    if (batch.old_log_probs.defined()) batch.old_log_probs.copy_(log_probs_now.detach());
    if (batch.ref_log_probs.defined()) batch.ref_log_probs.copy_(log_probs(models_.reference(batch), batch));
  }
  grpo::LossInputs inputs;
  inputs.log_probs = log_probs_now;
  // The first step is on-policy: the old policy is the forward itself (TRL's detach).
  if (!first) inputs.old_log_probs = batch.old_log_probs;
  inputs.ref_log_probs = batch.ref_log_probs;
  inputs.advantages = batch.advantages;
  inputs.mask = batch.completion_mask;
  auto terms = grpo::policy_loss(settings_, inputs);
  // Each figure is its mean over this micro-batch, weighted by the micro-batch's units: the step
  // divides the sum by the step's units (the rollout's figures then come out as they are).
  const auto units = this->units(batch).to(torch::kFloat32);
  const auto means = terms.figure_sums / terms.figure_counts.to(torch::kFloat32).clamp_min(1);
  auto figures = torch::cat({means, batch.mismatch, rollout_figures_}) * units;
  return {terms.loss, figures.detach()};
}

std::string GrpoObjective::describe() const {
  std::string clip = settings_.epsilon_high == settings_.epsilon_low
                         ? fmt::format("epsilon {}", settings_.epsilon_low)
                         : fmt::format("epsilon {} / {}", settings_.epsilon_low, settings_.epsilon_high);
  return fmt::format("grpo, loss_type {}, {}, {} importance ratios{}", loss_type_name(settings_.loss_type), clip,
                     settings_.importance_sampling_level == grpo::ImportanceLevel::token ? "token" : "sequence",
                     settings_.beta == 0 ? ", no KL (beta 0)"
                                         : fmt::format(", k3 KL beta {} to {}", settings_.beta,
                                                       models_.reference_description));
}

}  // namespace ampt::train

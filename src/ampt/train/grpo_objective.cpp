#include "ampt/train/grpo_objective.h"

#include "ampt/config/enum_names.h"
#include "ampt/data/document_examples.h"
#include "ampt/kernels/token_log_probs.h"

#include <fmt/format.h>

#include <utility>

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

GrpoObjective::GrpoObjective(grpo::LossSettings settings, double temperature, GrpoModels models,
                             std::vector<std::string> rollout_figures,
                             std::optional<grpo::SamplerCorrectionSettings> correction)
    : settings_(settings), temperature_(temperature), models_(std::move(models)), correction_(correction) {
  names_ = grpo::figure_names(settings_, /*with_entropy=*/true);
  for (const char* name : {"mismatch/kl", "mismatch/max_abs_logp", "mismatch/ratio_outside"}) names_.emplace_back(name);
  if (correction_) {
    const auto& sampling = grpo::sampler_figure_names();
    names_.insert(names_.end(), sampling.begin(), sampling.end());
  }
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
  // The sampler's function of the same logits (models::sample): in exact mode the same bits.
  return at_positions(kernels::token_log_probs(logits.flatten(0, -2), scored_targets(batch), 0, temperature_),
                      batch);
}

kernels::LogProbsAndEntropies GrpoObjective::log_probs_and_entropies(const torch::Tensor& logits,
                                                                     const data::Batch& batch) const {
  auto both = kernels::token_log_probs_and_entropies(logits.flatten(0, -2), scored_targets(batch), 0, temperature_);
  return {at_positions(both.log_probs, batch), at_positions(both.entropies, batch)};
}

ObjectiveLoss GrpoObjective::loss(const data::Batch& batch) {
  const auto logits = models_.policy(batch);
  const auto [log_probs_now, entropies] = log_probs_and_entropies(logits, batch);
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

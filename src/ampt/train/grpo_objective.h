// --objective grpo as an Objective: each micro-batch of a rollout's completions (rollout.h) is
// scored by the policy's training forward, its log-probabilities of the sampled tokens (of
// logits / temperature, as TRL's) entering grpo_loss.h's clipped policy gradient; the step
// weighs the micro-batches by the loss type's units, which makes the step's loss TRL's.
//
// A rollout serves num_iterations steps: its first step is on-policy (every ratio 1, the old
// log-probabilities those of the forward itself) and keeps them, with the reference's where beta
// > 0, in the batch for the later steps. The first step also measures the sampler's mismatch
// (sampled_objective.h). Under --sampler fast it also weighs each token's loss by TRL's truncated
// or masked importance weight of trainer over sampler (sampler_weights, grpo_loss.h), logged as
// TRL's sampling/* figures.
#pragma once

#include "ampt/data/batch.h"
#include "ampt/train/grpo_loss.h"
#include "ampt/train/sampled_objective.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ampt::train {

struct GrpoModels {
  // The trained model's logits [rows, T, vocab], with gradients.
  std::function<torch::Tensor(const data::Batch&)> policy;
  // The reference's, without gradients; null when beta is 0.
  std::function<torch::Tensor(const data::Batch&)> reference;
  std::string reference_description;
  std::string sampler_description;  // which sampler, and how its mismatch is corrected
};

class GrpoObjective : public SampledObjective {
 public:
  // `rollout_figures`: the names of the rollout's figures (Rollout::figure_names), reported
  // beside the loss's.
  // `correction`: --sampler fast's importance weights (none: the exact sampler, whose mismatch
  // is 0), computed on a rollout's first step and kept for its later ones.
  GrpoObjective(grpo::LossSettings settings, double temperature, GrpoModels models,
                std::vector<std::string> rollout_figures,
                std::optional<grpo::SamplerCorrectionSettings> correction = std::nullopt);

  torch::Tensor units(const data::Batch& batch) const override;
  ObjectiveLoss loss(const data::Batch& batch) override;
  const std::vector<std::string>& figure_names() const override { return names_; }
  std::string describe() const override;

 private:
  grpo::LossSettings settings_;
  GrpoModels models_;
  std::optional<grpo::SamplerCorrectionSettings> correction_;
  std::vector<std::string> names_;
};

}  // namespace ampt::train

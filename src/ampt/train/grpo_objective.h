// --objective grpo as an Objective: each micro-batch of a rollout's completions (rollout.h) is
// scored by the policy's training forward, its log-probabilities of the sampled tokens (of
// logits / temperature, as TRL's) entering grpo_loss.h's clipped policy gradient; the step
// weighs the micro-batches by the loss type's units, which makes the step's loss TRL's.
//
// A rollout serves num_iterations steps: its first step is on-policy (every ratio 1, the old
// log-probabilities those of the forward itself) and keeps them, with the reference's where beta
// > 0, in the batch for the later steps. The first step also measures how far the sampler's
// log-probabilities are from the trainer's on the same tokens: mismatch/kl (the k3 estimate of
// KL(sampler || trainer)), mismatch/max_abs_logp and mismatch/ratio_outside (the share of tokens
// whose probability ratio lies outside [0.9, 1.1]). Under --sampler fast it also weighs each token's
// loss by TRL's truncated or masked importance weight of trainer over sampler (sampler_weights,
// grpo_loss.h), logged as TRL's sampling/* figures.
#pragma once

#include "ampt/data/batch.h"
#include "ampt/kernels/token_log_probs.h"
#include "ampt/train/grpo_loss.h"
#include "ampt/train/objective.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ampt::train {

struct GrpoModels {
  // The trained model's logits [rows, T, vocab], with gradients: [N, vocab] of the completion's
  // positions alone where the batch names them (Batch::logit_rows, as the rollout's do).
  std::function<torch::Tensor(const data::Batch&)> policy;
  // The reference's, without gradients; null when beta is 0.
  std::function<torch::Tensor(const data::Batch&)> reference;
  std::string reference_description;
  std::string sampler_description;  // which sampler, and how its mismatch is corrected
};

class GrpoObjective : public Objective {
 public:
  // `rollout_figures`: the names of the rollout's figures (Rollout::figure_names), reported
  // beside the loss's.
  // `correction`: --sampler fast's importance weights (none: the exact sampler, whose mismatch
  // is 0), computed on a rollout's first step and kept for its later ones.
  GrpoObjective(grpo::LossSettings settings, double temperature, GrpoModels models,
                std::vector<std::string> rollout_figures,
                std::optional<grpo::SamplerCorrectionSettings> correction = std::nullopt);

  // Before the steps on a new rollout: its figures [rollout_figures.size()] on the device.
  void begin_rollout(torch::Tensor figures);
  // Which step on the current rollout the next ones are (0: its first).
  void set_iteration(int64_t iteration) { iteration_ = iteration; }

  torch::Tensor units(const data::Batch& batch) const override;
  ObjectiveLoss loss(const data::Batch& batch) override;
  const std::vector<std::string>& figure_names() const override { return names_; }
  std::string describe() const override;

 private:
  // [rows, T] float32: each target's log-probability under logits / temperature (0 off the
  // completion).
  torch::Tensor log_probs(const torch::Tensor& logits, const data::Batch& batch) const;
  // The same, with each completion position's entropy of softmax(logits / temperature) [rows, T]
  // float32 without gradient (0 elsewhere), TRL's `entropy` figure (its mean over the completion
  // tokens), from the same pass.
  kernels::LogProbsAndEntropies log_probs_and_entropies(const torch::Tensor& logits,
                                                        const data::Batch& batch) const;

  grpo::LossSettings settings_;
  double temperature_;
  GrpoModels models_;
  std::optional<grpo::SamplerCorrectionSettings> correction_;
  std::vector<std::string> names_;
  torch::Tensor rollout_figures_;
  int64_t iteration_ = 0;
};

}  // namespace ampt::train

// What the objectives that train on a rollout's completions share (rollout.h: GRPO's,
// grpo_objective.h, and on-policy distillation's, distill_objective.h): each micro-batch's
// sampled tokens are scored by the policy's training forward at the sampler's temperature (the
// sampler's own function of the logits, kernels::token_log_probs: in exact mode the same bits),
// the first step on a rollout measures how far the sampler's log-probabilities are from the
// trainer's on those tokens, and the rollout's figures are reported beside the loss's.
//
// The mismatch figures: mismatch/kl (the k3 estimate of KL(sampler || trainer)),
// mismatch/max_abs_logp and mismatch/ratio_outside (the share of tokens whose probability ratio
// lies outside [0.9, 1.1]); exact mode shows 0.
#pragma once

#include "ampt/data/batch.h"
#include "ampt/train/objective.h"

#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace ampt::train {

class SampledObjective : public Objective {
 public:
  // Before the steps on a new rollout: its figures [Rollout::figure_names().size()] on the device.
  void begin_rollout(torch::Tensor figures);
  // Which step on the current rollout the next ones are (0: its first).
  void set_iteration(int64_t iteration) { iteration_ = iteration; }

  // mismatch/kl, mismatch/max_abs_logp, mismatch/ratio_outside: measure_mismatch's, in order.
  static const std::vector<std::string>& mismatch_names();

 protected:
  // `temperature`: the sampler's, which the policy's log-probabilities are taken at.
  explicit SampledObjective(double temperature) : temperature_(temperature) {}

  // [rows, T] float32: each target's log-probability under logits / temperature (0 off the
  // completion).
  torch::Tensor log_probs(const torch::Tensor& logits, const data::Batch& batch) const;
  // [rows, T] float32, no gradient: each position's entropy of softmax(logits / temperature), TRL's
  // `entropy` figure (its mean over the completion tokens).
  torch::Tensor entropies(const torch::Tensor& logits, const data::Batch& batch) const;
  // The first step on a rollout: batch.mismatch [3] becomes the mismatch figures of the trainer's
  // log-probabilities `trainer` [rows, T] (no gradient) against the sampler's, over the
  // completion tokens.
  static void measure_mismatch(const torch::Tensor& trainer, const data::Batch& batch);

  double temperature_;
  torch::Tensor rollout_figures_;
  int64_t iteration_ = 0;
};

}  // namespace ampt::train

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
#include "ampt/kernels/token_log_probs.h"
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
  // completion). `logits` are the model's of the batch: [rows, T, vocab], or [N, vocab] of the
  // completion's positions where the batch names them (Batch::logit_rows, as the rollout's do).
  torch::Tensor log_probs(const torch::Tensor& logits, const data::Batch& batch) const {
    return log_probs_at(logits, batch, temperature_);
  }
  // The same at another temperature (a teacher's log-probabilities at 1).
  static torch::Tensor log_probs_at(const torch::Tensor& logits, const data::Batch& batch, double temperature);
  // log_probs, with each completion position's entropy of softmax(logits / temperature) [rows, T]
  // float32 without gradient (0 elsewhere; TRL's `entropy` figure, its mean over the completion
  // tokens) from the same pass.
  kernels::LogProbsAndEntropies log_probs_and_entropies(const torch::Tensor& logits,
                                                        const data::Batch& batch) const;
  // The first step on a rollout: batch.mismatch [3] becomes the mismatch figures of the trainer's
  // log-probabilities `trainer` [rows, T] (no gradient) against the sampler's, over the
  // completion tokens.
  static void measure_mismatch(const torch::Tensor& trainer, const data::Batch& batch);

  double temperature_;
  torch::Tensor rollout_figures_;
  int64_t iteration_ = 0;
};

}  // namespace ampt::train

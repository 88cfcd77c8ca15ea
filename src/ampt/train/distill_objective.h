// --objective distill as an Objective: on-policy distillation as Thinking Machines' recipe
// computes it (tinker-cookbook's distillation/train_on_policy.py, the "importance_sampling"
// loss). The student, the trained model, has sampled each completion (rollout.h); the frozen
// teacher scores the sampled tokens, and each token's advantage is the negative reverse KL
// estimate on it,
//   A_t = -(log p_student(x_t) - log p_teacher(x_t)),
// log p_student the sampler's log-probability (at the sampler's temperature) and log p_teacher
// the teacher's (at temperature 1: the distribution the student is pulled towards); the
// discount is 0 (each token its own advantage, the cookbook's default). The loss per token is
// the importance-weighted policy gradient -A_t * exp(log p_now(x_t) - log p_sampler(x_t)), A_t
// detached, averaged over the step's completion tokens (the step weighs each micro-batch by its
// tokens). Under --sampler exact the ratio is 1 in value, its gradient log p_now's, and the loss's
// value is the mean reverse KL itself.
#pragma once

#include "ampt/data/batch.h"
#include "ampt/train/sampled_objective.h"

#include <functional>
#include <string>
#include <vector>

namespace ampt::train {

struct DistillModels {
  // The student's logits [rows, T, vocab], with gradients.
  std::function<torch::Tensor(const data::Batch&)> policy;
  // The teacher's, without gradients, over the same vocabulary.
  std::function<torch::Tensor(const data::Batch&)> teacher;
  // "qwen3-8b (llama: n_layer 36, ...), frozen, its Linear weights in BFloat16, ..."
  std::string teacher_description;
  std::string sampler_description;  // "exact sampler", "fast sampler"
};

class DistillObjective : public SampledObjective {
 public:
  // `temperature`: the sampler's; `rollout_figures`: the rollout's figures' names
  // (Rollout::figure_names), reported beside the loss's.
  DistillObjective(double temperature, DistillModels models, std::vector<std::string> rollout_figures);

  // The micro-batch's counted completion tokens.
  torch::Tensor units(const data::Batch& batch) const override;
  // The loss above. Figures: distill/reverse_kl (the mean reverse KL estimate over the counted
  // completion tokens, the cookbook's teacher_kl), entropy, the mismatch figures, the rollout's.
  ObjectiveLoss loss(const data::Batch& batch) override;
  const std::vector<std::string>& figure_names() const override { return names_; }
  std::string describe() const override;

 private:
  DistillModels models_;
  std::vector<std::string> names_;
};

}  // namespace ampt::train

// On-policy distillation's loss (train/distill_objective.h) on fixed samples, against a hand
// computation of its own: the student's log-probabilities (log_softmax of logits / temperature)
// and the teacher's (log_softmax of its logits at temperature 1) taken here, the per-token reverse
// KL log p_sampler - log p_teacher on the counted completion tokens, the loss
// sum(reverse KL x exp(log p_now - log p_sampler)) / tokens, its gradient with respect to the
// student's logits, and the figures (each a mean over the micro-batch times its tokens, as the step
// sums them); exact samples (the sampler's log-probabilities the trainer's) and samples whose
// sampler log-probabilities differ (the ratio then weighs each token).
#include "ampt/data/batch.h"
#include "ampt/data/document_examples.h"
#include "ampt/train/distill_objective.h"

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <string>
#include <vector>

namespace {

using ampt::data::kIgnoredTarget;

constexpr double kDistillTemperature = 0.7;

struct DistillSamples {
  torch::Tensor student_logits;  // [2, 5, 7], a leaf with gradients
  torch::Tensor teacher_logits;  // [2, 5, 7]
  ampt::data::Batch batch;
  torch::Tensor scored;  // [2, 5] 1 on every sampled token
  torch::Tensor mask;    // [2, 5] 1 on the counted ones (the second row's last is masked)
};

// Two completions of 3 and 2 tokens after prompts of 1 and 2; `sampler_offset` added to the
// sampler's log-probabilities (0: exact samples).
DistillSamples distill_samples(double sampler_offset) {
  torch::manual_seed(11);
  DistillSamples s;
  s.student_logits = torch::randn({2, 5, 7}).requires_grad_(true);
  s.teacher_logits = 2 * torch::randn({2, 5, 7});
  const int64_t x = kIgnoredTarget;
  s.batch.targets = torch::tensor(std::vector<int64_t>{x, 3, 1, 4, x, x, x, 2, 6, x}).view({2, 5});
  s.scored = (s.batch.targets != kIgnoredTarget).to(torch::kFloat32);
  s.mask = s.scored.clone();
  s.mask[1][3] = 0;
  s.batch.completion_mask = s.mask;
  {
    torch::NoGradGuard no_grad;
    const auto logp = (s.student_logits / kDistillTemperature).log_softmax(-1);
    const auto picked = logp.gather(-1, s.batch.targets.clamp_min(0).unsqueeze(-1)).squeeze(-1);
    const auto noise = sampler_offset * torch::randn({2, 5});
    s.batch.sampler_log_probs = ((picked + noise) * s.scored).contiguous();
  }
  s.batch.mismatch = torch::zeros({3});
  s.batch.advantages = torch::zeros({2});
  return s;
}

// The objective's loss, figures and the student logits' gradient, and the same by hand.
void check_distill_loss(double sampler_offset) {
  auto s = distill_samples(sampler_offset);
  ampt::train::DistillModels models;
  models.policy = [&](const ampt::data::Batch&) { return s.student_logits; };
  models.teacher = [&](const ampt::data::Batch&) { return s.teacher_logits; };
  ampt::train::DistillObjective objective(kDistillTemperature, models,
                                          {"completions/mean_length", "completions/clipped_ratio"});
  const auto rollout = torch::tensor({2.5f, 0.25f});
  objective.begin_rollout(rollout);
  REQUIRE(objective.figure_names() ==
          std::vector<std::string>{"distill/reverse_kl", "entropy", "mismatch/kl", "mismatch/max_abs_logp",
                                   "mismatch/ratio_outside", "completions/mean_length", "completions/clipped_ratio"});
  CHECK(objective.units(s.batch).item<int64_t>() == 4);
  const auto out = objective.loss(s.batch);
  out.loss.backward();
  const auto gradient = s.student_logits.grad().clone();
  s.student_logits.grad().zero_();

  // By hand.
  const auto targets = s.batch.targets.clamp_min(0).unsqueeze(-1);
  const auto logp_now = (s.student_logits / kDistillTemperature).log_softmax(-1).gather(-1, targets).squeeze(-1);
  const auto logp_teacher = s.teacher_logits.log_softmax(-1).gather(-1, targets).squeeze(-1);
  const auto& sampler = s.batch.sampler_log_probs;
  const auto tokens = s.mask.sum();
  const auto reverse_kl = (sampler - logp_teacher) * s.mask;
  const auto ratio = (logp_now - sampler).exp() * s.scored;
  const auto loss = (reverse_kl * ratio).sum() / tokens;
  loss.backward();
  CHECK(out.loss.item<double>() == Approx(loss.item<double>()).epsilon(1e-6));
  CHECK(torch::allclose(gradient, s.student_logits.grad(), 1e-5, 1e-7));
  if (sampler_offset == 0) {
    // Every ratio 1: the loss is the mean reverse KL.
    CHECK(out.loss.item<double>() == Approx((reverse_kl.sum() / tokens).item<double>()).epsilon(1e-6));
  }

  torch::NoGradGuard no_grad;
  const auto logp_all = (s.student_logits / kDistillTemperature).log_softmax(-1);
  const auto entropy = -(logp_all.exp() * logp_all).sum(-1);
  const auto difference = (logp_now - sampler) * s.scored;
  const auto k3 = (difference.exp() - 1 - difference) * s.scored;
  const auto outside = ((difference.exp() - 1).abs() > 0.1).to(torch::kFloat32) * s.scored;
  const auto scored = s.scored.sum();
  const std::vector<double> expected{reverse_kl.sum().item<double>(),
                                     (entropy * s.mask).sum().item<double>(),
                                     (k3.sum() / scored * tokens).item<double>(),
                                     (difference.abs().max() * tokens).item<double>(),
                                     (outside.sum() / scored * tokens).item<double>(),
                                     2.5 * 4,
                                     0.25 * 4};
  REQUIRE(out.figures.numel() == static_cast<int64_t>(expected.size()));
  for (size_t i = 0; i < expected.size(); ++i) {
    INFO(objective.figure_names()[i]);
    CHECK(out.figures[static_cast<int64_t>(i)].item<double>() == Approx(expected[i]).epsilon(1e-5).margin(1e-6));
  }
}

}  // namespace

TEST_CASE("distill loss: exact samples, by hand", "[train][distill]") { check_distill_loss(0.0); }

TEST_CASE("distill loss: samples whose sampler log-probabilities differ, by hand", "[train][distill]") {
  check_distill_loss(0.3);
}

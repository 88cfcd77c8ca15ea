#include "ampt/train/grpo_loss.h"

#include "ampt/core/errors.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <limits>
#include <tuple>
#include <utility>

namespace ampt::train::grpo {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

void require_shape(const torch::Tensor& tensor, c10::IntArrayRef shape, const char* what,
                   const char* where) {
  if (!tensor.defined()) throw RuntimeError(fmt::format("{}: {} is missing", where, what));
  if (tensor.sizes() != shape) {
    throw RuntimeError(fmt::format("{}: {} has shape [{}], expected [{}]", where, what,
                                   fmt::join(tensor.sizes(), ", "), fmt::join(shape, ", ")));
  }
}

// TRL's nanstd without NaNs: the Bessel-corrected std along `dim` (all elements: nullopt) from
// the mean of squared deviations, as it computes it; [P, 1] or 0-dim.
torch::Tensor bessel_std(const torch::Tensor& x, std::optional<int64_t> dim) {
  const auto n = dim ? x.size(*dim) : x.numel();
  const auto mean = dim ? x.mean(*dim, true) : x.mean();
  const auto squares = (x - mean).square();
  const auto variance = dim ? squares.mean(*dim, true) : squares.mean();
  return (variance * (static_cast<double>(n) / static_cast<double>(n - 1))).sqrt();
}

// The least and largest of x over `valid` (TRL's nanmin and nanmax of what it selects), each NaN
// when nothing is valid; no boolean indexing, so no sync.
std::pair<torch::Tensor, torch::Tensor> extremes(const torch::Tensor& x, const torch::Tensor& valid,
                                                 double empty) {
  const auto any = valid.any();
  const auto low = torch::where(valid, x, kInf).amin();
  const auto high = torch::where(valid, x, -kInf).amax();
  return {torch::where(any, low, empty), torch::where(any, high, empty)};
}

}  // namespace

Advantages group_advantages(const torch::Tensor& rewards, RewardScaling scaling) {
  if (rewards.dim() != 2 || !rewards.is_floating_point()) {
    throw RuntimeError(fmt::format(
        "grpo advantages: rewards must be a floating [prompts, num_generations] tensor, got {} [{}]",
        std::string(c10::toString(rewards.scalar_type())), fmt::join(rewards.sizes(), ", ")));
  }
  const auto group = rewards.size(1);
  const auto mean = rewards.mean(1, true);
  torch::Tensor std;
  if (scaling == RewardScaling::batch) {
    // TRL's special case: a batch of one has std 0.
    std = rewards.numel() > 1 ? bessel_std(rewards, std::nullopt).expand_as(rewards)
                              : torch::zeros_like(rewards);
  } else {
    // none keeps the group std for frac_reward_zero_std alone; a group of one has std 0.
    std = group > 1 ? bessel_std(rewards, 1).expand_as(rewards) : torch::zeros_like(rewards);
  }
  auto advantages = rewards - mean;
  if (scaling != RewardScaling::none) advantages = advantages / (std + 1e-4);
  const auto zero_std = torch::isclose(std, torch::zeros_like(std));
  return {advantages.flatten(), zero_std.to(rewards.scalar_type()).mean()};
}

SamplerWeights sampler_weights(const torch::Tensor& trainer_log_probs,
                               const torch::Tensor& sampler_log_probs, const torch::Tensor& mask,
                               const SamplerCorrectionSettings& settings) {
  constexpr const char* where = "grpo sampler weights";
  if (!trainer_log_probs.defined() || trainer_log_probs.dim() != 2) {
    throw RuntimeError(fmt::format("{}: trainer_log_probs must be a [B, T] tensor", where));
  }
  require_shape(sampler_log_probs, trainer_log_probs.sizes(), "sampler_log_probs", where);
  require_shape(mask, trainer_log_probs.sizes(), "mask", where);
  const torch::NoGradGuard no_grad;
  const auto m = mask.to(trainer_log_probs.scalar_type());
  const bool per_sequence = settings.mode == SamplerCorrection::sequence_truncate ||
                            settings.mode == SamplerCorrection::sequence_mask;
  auto difference = ((trainer_log_probs - sampler_log_probs) * m).nan_to_num(0.0);
  if (per_sequence) difference = difference.sum(-1, true);
  auto ratio = difference.exp();
  if (settings.mode == SamplerCorrection::token_truncate ||
      settings.mode == SamplerCorrection::sequence_truncate) {
    const auto bound = [](std::optional<double> v) {
      return v ? std::optional<c10::Scalar>(*v) : std::nullopt;
    };
    ratio = ratio.clamp(bound(settings.min), bound(settings.max));
  } else {
    const auto outside = (ratio < settings.min.value_or(-kInf)) | (ratio > settings.max.value_or(kInf));
    ratio = ratio.masked_fill(outside, 0.0);
  }

  const auto delta = (trainer_log_probs - sampler_log_probs).abs();
  const auto scored = mask.ne(0) & delta.isnan().logical_not();
  const auto scored_count = scored.sum();
  const auto delta_mean = delta.masked_fill(scored.logical_not(), 0.0).sum() / scored_count.clamp_min(1);
  const auto delta_max = extremes(delta, scored, 0.0).second;
  torch::Tensor low, high, ratio_mean;
  if (per_sequence) {
    low = ratio.amin();
    high = ratio.amax();
    ratio_mean = ratio.mean();
  } else {
    const auto counted = mask.ne(0);
    std::tie(low, high) = extremes(ratio, counted, 0.0);
    ratio_mean = (ratio * m).sum() / counted.sum().clamp_min(1);
  }
  return {ratio, torch::stack({delta_mean, delta_max, low, ratio_mean, high})};
}

const std::vector<std::string>& sampler_figure_names() {
  static const std::vector<std::string> names{
      "sampling/sampling_logp_difference/mean", "sampling/sampling_logp_difference/max",
      "sampling/importance_sampling_ratio/min", "sampling/importance_sampling_ratio/mean",
      "sampling/importance_sampling_ratio/max"};
  return names;
}

torch::Tensor loss_units(LossType loss_type, const torch::Tensor& mask) {
  if (loss_type == LossType::dapo) return mask.ne(0).sum();
  return torch::full({}, mask.size(0), torch::dtype(torch::kInt64).device(mask.device()));
}

LossTerms policy_loss(const LossSettings& settings, const LossInputs& in) {
  constexpr const char* where = "grpo loss";
  const auto& logp = in.log_probs;
  if (!logp.defined() || logp.dim() != 2 || !logp.is_floating_point()) {
    throw RuntimeError(fmt::format("{}: log_probs must be a floating [B, T] tensor", where));
  }
  const auto rows = logp.size(0);
  require_shape(in.mask, logp.sizes(), "mask", where);
  require_shape(in.advantages, {rows}, "advantages", where);
  if (in.old_log_probs.defined()) {
    require_shape(in.old_log_probs, logp.sizes(), "old_log_probs", where);
  }
  if (settings.beta != 0.0) {
    const auto what = fmt::format("ref_log_probs (beta {})", settings.beta);
    require_shape(in.ref_log_probs, logp.sizes(), what.c_str(), where);
  }
  if (in.entropies.defined()) require_shape(in.entropies, logp.sizes(), "entropies", where);
  if (in.sampler_weights.defined() &&
      !(in.sampler_weights.dim() == 2 && in.sampler_weights.size(0) == rows &&
        (in.sampler_weights.size(1) == 1 || in.sampler_weights.size(1) == logp.size(1)))) {
    throw RuntimeError(fmt::format("{}: sampler_weights has shape [{}], expected [{}, {}] or [{}, 1]",
                                   where, fmt::join(in.sampler_weights.sizes(), ", "), rows,
                                   logp.size(1), rows));
  }
  if (settings.loss_type == LossType::dr_grpo && settings.max_completion_length < 1) {
    throw RuntimeError(fmt::format("{}: dr_grpo divides by max_completion_length, which is {}",
                                   where, settings.max_completion_length));
  }

  // The order of TRL's _compute_loss, operation for operation.
  const auto mask = in.mask.to(logp.scalar_type());
  const auto tokens = mask.sum(-1);  // [B]
  const auto old = in.old_log_probs.defined() ? in.old_log_probs : logp.detach();
  const auto log_ratio = logp - old;
  const bool per_sequence = settings.importance_sampling_level == ImportanceLevel::sequence;
  const auto log_weights =
      per_sequence ? ((log_ratio * mask).sum(-1) / tokens.clamp_min(1.0)).unsqueeze(-1) : log_ratio;
  const auto coef_1 = log_weights.exp();  // [B, T], or [B, 1] per sequence
  torch::Tensor kl;
  if (settings.beta != 0.0) {
    const auto ref_minus = in.ref_log_probs - logp;
    kl = ref_minus.exp() - ref_minus - 1;
    if (settings.kl_bias_correction) kl = kl * coef_1;
  }
  const auto advantages = in.advantages.unsqueeze(1);
  const auto coef_2 = coef_1.clamp(1 - settings.epsilon_low, 1 + settings.epsilon_high);
  auto per_token = -torch::min(coef_1 * advantages, coef_2 * advantages);
  if (in.sampler_weights.defined()) per_token = per_token * in.sampler_weights;
  if (settings.beta != 0.0) per_token = per_token + settings.beta * kl;

  const auto masked = per_token * mask;  // [B, T]: a per-sequence loss spreads over its tokens
  torch::Tensor loss;
  switch (settings.loss_type) {
    case LossType::grpo: loss = (masked.sum(-1) / tokens.clamp_min(1.0)).mean(); break;
    case LossType::dr_grpo:
      loss = masked.sum() / static_cast<double>(rows * settings.max_completion_length);
      break;
    case LossType::dapo:
    case LossType::bnpo: loss = masked.sum() / mask.sum().clamp_min(1.0); break;
  }

  const torch::NoGradGuard no_grad;
  const auto token_count = mask.sum();
  std::vector<torch::Tensor> sums, counts;
  if (kl.defined()) {
    sums.push_back((kl * mask).sum());
    counts.push_back(token_count);
  }
  if (in.entropies.defined()) {
    sums.push_back((in.entropies * mask).sum());
    counts.push_back(token_count);
  }
  const auto low = (coef_1 < 1 - settings.epsilon_low) & (advantages < 0);
  const auto high = (coef_1 > 1 + settings.epsilon_high) & (advantages > 0);
  const auto sequence_count = torch::full({}, static_cast<double>(rows), mask.options());
  for (const auto& clipped : {low, high, low | high}) {
    const auto x = clipped.to(mask.scalar_type());
    sums.push_back(per_sequence ? x.sum() : (x * mask).sum());
    counts.push_back(per_sequence ? sequence_count : token_count);
  }
  // Each sequence's clipped fraction: 0 / 0 (NaN) for a sequence without tokens, which TRL's
  // nanmin and nanmax pass over.
  const auto low_fraction = per_sequence ? low.to(mask.scalar_type()).squeeze(1)
                                         : (low.to(mask.scalar_type()) * mask).sum(-1) / tokens;
  const auto high_fraction = per_sequence ? high.to(mask.scalar_type()).squeeze(1)
                                          : (high.to(mask.scalar_type()) * mask).sum(-1) / tokens;
  const auto nan = std::numeric_limits<double>::quiet_NaN();
  const auto low_min = extremes(low_fraction, low_fraction.isnan().logical_not(), nan).first;
  const auto high_max = extremes(high_fraction, high_fraction.isnan().logical_not(), nan).second;
  return {loss, torch::stack(sums), torch::stack(counts), torch::stack({low_min, high_max})};
}

std::vector<std::string> figure_names(const LossSettings& settings, bool with_entropy) {
  std::vector<std::string> names;
  if (settings.beta != 0.0) names.emplace_back("kl");
  if (with_entropy) names.emplace_back("entropy");
  for (const char* name : {"clip_ratio/low_mean", "clip_ratio/high_mean", "clip_ratio/region_mean"}) {
    names.emplace_back(name);
  }
  return names;
}

const std::vector<std::string>& clip_extreme_names() {
  static const std::vector<std::string> names{"clip_ratio/low_min", "clip_ratio/high_max"};
  return names;
}

}  // namespace ampt::train::grpo

// The GRPO family's tensor arithmetic as TRL 1.16's GRPOTrainer computes it
// (trl/trainer/grpo_trainer.py): group-normalised advantages from rewards, the clipped
// importance-weighted policy loss of each loss type (grpo, dr_grpo, dapo, bnpo) with its
// normaliser, the k3 KL to a reference, sequence-level importance weights (GSPO), the
// truncated importance-sampling weights that correct a sampler whose log-probabilities differ
// from the trainer's, and the figures TRL logs, under its names. Plain tensors in, tensors out,
// none read back to the host: the GRPO objective calls these on its micro-batches and the step
// weighs them (objective.h's units).
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ampt::train::grpo {

// TRL's loss_type; each normalises the summed token losses its own way (LossSettings).
enum class LossType { grpo, dr_grpo, dapo, bnpo };
// TRL's scale_rewards: divide each advantage by its group's reward std, the whole batch's, or not.
enum class RewardScaling { group, batch, none };
// TRL's importance_sampling_level: one ratio per token, or per sequence (GSPO: the exponential of
// the mean log-ratio over its completion tokens).
enum class ImportanceLevel { token, sequence };
// TRL's vllm_importance_sampling_mode: per-token or per-sequence ratio of the trainer's to the
// sampler's probability, clamped into [min, max] (truncate) or set to 0 outside it (mask).
enum class SamplerCorrection { token_truncate, token_mask, sequence_truncate, sequence_mask };

struct Advantages {
  torch::Tensor advantages;            // [prompts * G], prompt-major, the rewards' dtype
  torch::Tensor frac_reward_zero_std;  // 0-dim: TRL's frac_reward_zero_std
};

// `rewards` [prompts, G]: each prompt's G completions' total rewards, over every rank's prompts
// (the batch std spans them all). Advantage = reward - its group's mean, divided by (std + 1e-4)
// unless `scaling` is none; std is Bessel-corrected, 0 for a group of one or a batch of one, as
// TRL's nanstd and its special cases give.
Advantages group_advantages(const torch::Tensor& rewards, RewardScaling scaling);

struct SamplerCorrectionSettings {
  SamplerCorrection mode = SamplerCorrection::sequence_mask;  // TRL's default
  std::optional<double> min;        // vllm_importance_sampling_clip_min: none
  std::optional<double> max = 3.0;  // vllm_importance_sampling_clip_max: the cap
};

struct SamplerWeights {
  torch::Tensor weights;  // [B, T] token modes, [B, 1] sequence modes; no gradient
  // [sampler_figure_names().size()]: the mean and max |trainer - sampler| log-probability over
  // the completion tokens, and the least, mean and largest weight (over the completion tokens,
  // or over every sequence in a sequence mode); 0 where there is nothing to take them over.
  torch::Tensor figures;
};

// Once per generation batch, as TRL does when it samples with vLLM: `trainer_log_probs` [B, T]
// are the trainer's (no gradient) for the sampled tokens, `sampler_log_probs` the sampler's,
// `mask` [B, T] 1 on the completion tokens counted. A token whose difference is NaN weighs 1.
SamplerWeights sampler_weights(const torch::Tensor& trainer_log_probs,
                               const torch::Tensor& sampler_log_probs, const torch::Tensor& mask,
                               const SamplerCorrectionSettings& settings);
// sampling/sampling_logp_difference/{mean,max}, sampling/importance_sampling_ratio/{min,mean,max}
const std::vector<std::string>& sampler_figure_names();

struct LossSettings {
  LossType loss_type = LossType::dapo;  // TRL's default
  double epsilon_low = 0.2;             // TRL's epsilon
  double epsilon_high = 0.2;            // TRL's epsilon_high, which defaults to epsilon
  double beta = 0.0;                    // the k3 KL's weight; 0: no reference
  // TRL's use_bias_correction_kl (on by default): the KL term times the (differentiable)
  // importance ratio, whose gradient is then the unbiased reverse-KL gradient.
  bool kl_bias_correction = true;
  ImportanceLevel importance_sampling_level = ImportanceLevel::token;
  int64_t max_completion_length = 256;  // dr_grpo's constant (TRL's default 256)
};

// One micro-batch of B completions padded to T tokens.
struct LossInputs {
  torch::Tensor log_probs;      // [B, T] floating, with gradient: the policy's, for the sampled tokens
  // [B, T], no gradient: the log-probabilities the completions were scored with when sampled
  // (the sampler's, or the trainer's at generation time); num_iterations > 1 reuses them while
  // the weights move. Undefined: log_probs' own values (on-policy: every ratio 1).
  torch::Tensor old_log_probs;
  torch::Tensor ref_log_probs;  // [B, T], no gradient: the reference's; needed when beta != 0
  torch::Tensor advantages;     // [B]
  // [B, T], 1 on the completion tokens that count, 0 on padding (and on every token of a
  // truncated completion under mask_truncated_completions); any dtype.
  torch::Tensor mask;
  torch::Tensor sampler_weights;  // SamplerWeights::weights, or undefined: none
  torch::Tensor entropies;        // [B, T]: the policy's per-token entropies, or undefined
};

struct LossTerms {
  // 0-dim: the micro-batch's loss, the mean over its loss_units (TRL's logged policy_loss).
  torch::Tensor loss;
  // Detached, [figure_names(...).size()] each: each figure's sum and count over this
  // micro-batch; TRL's figure is sum / max(count, 1), both summed over the ranks first.
  torch::Tensor figure_sums;
  torch::Tensor figure_counts;
  // [2], detached: clip_ratio/low_min and clip_ratio/high_max, the least low-clipped and the most
  // high-clipped fraction of a sequence (min and max over the ranks); NaN where no sequence has a
  // completion token.
  torch::Tensor clip_extremes;
};

// What the step weighs a micro-batch by (a 0-dim int64 tensor on the mask's device, no sync):
// its sequences for grpo (a mean of per-sequence means), dr_grpo (its sum over B times
// max_completion_length) and bnpo (its own token mean, TRL's micro-batch normalisation); its
// completion tokens for dapo (the step's total: TRL's token count over the generation batch,
// its ranks and accumulation steps). The micro-batch's loss times its units over the step's
// (and the ranks' mean of the gradients) is then TRL's loss for each type.
torch::Tensor loss_units(LossType loss_type, const torch::Tensor& mask);

// TRL's per-token loss -min(r A, clip(r, 1 - epsilon_low, 1 + epsilon_high) A) (r the
// importance ratio; times the sampler weight; plus beta times the k3 KL
// exp(ref - logp) - (ref - logp) - 1, itself times r under kl_bias_correction), reduced over
// the mask as loss_type normalises it, and the figures.
LossTerms policy_loss(const LossSettings& settings, const LossInputs& inputs);

// The names of LossTerms' figures, in order: kl (when beta != 0), entropy (when given
// entropies), clip_ratio/low_mean, clip_ratio/high_mean, clip_ratio/region_mean.
std::vector<std::string> figure_names(const LossSettings& settings, bool with_entropy);
// clip_ratio/low_min, clip_ratio/high_max
const std::vector<std::string>& clip_extreme_names();

}  // namespace ampt::train::grpo

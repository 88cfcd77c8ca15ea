// The rollout of GRPO and on-policy distillation: a batch of prompts becomes the micro-batches a
// step trains on. Each prompt's G completions are sampled by the run's own Policy (its decode
// step: the weights being trained, their precision and adapters, no copy), with draws keyed by
// (seed, generation, prompt, sample), so that a prompt samples the same completions whatever
// else is in its batch and in a resumed run; GRPO's rewards score each group and group_advantages
// makes their advantages (distillation has none: its teacher scores each token in the
// objective), and the completions are laid out as training rows: prompt then completion, the
// targets the completion's tokens (the stop token included, as TRL's mask ends at the first EOS),
// beside the sampler's log-probability of each, the advantages and the completion mask.
#pragma once

#include "ampt/data/batch.h"
#include "ampt/data/prompt_dataset.h"
#include "ampt/models/generation.h"
#include "ampt/reward/rewards.h"
#include "ampt/text/tokenizer.h"
#include "ampt/train/grpo_loss.h"

#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace ampt::train {

struct RolloutSettings {
  int64_t generations = 8;          // completions per prompt
  int64_t rows_per_micro_batch = 1;  // batch_size: completions per micro-batch
  models::SamplingOptions sampling;  // max_new_tokens is max_completion_length; its step is set per rollout
  grpo::RewardScaling scaling = grpo::RewardScaling::group;
  bool mask_truncated = false;  // a truncated completion's tokens take no part in the loss
  // Room for what the objective keeps of a batch's first step: the old policy's log-probabilities
  // (num_iterations > 1) and the reference's (beta > 0).
  bool keep_old_log_probs = false;
  bool keep_reference = false;
  bool keep_sampler_weights = false;  // --sampler fast: the importance weights that correct it
  torch::Device device = torch::kCPU;
};

// One completion as completions.jsonl shows it.
struct ShownCompletion {
  int64_t prompt = 0;  // its index among the data's prompts
  std::string prompt_text;
  std::string completion;
  double reward = 0;     // 0 without rewards
  double advantage = 0;  // 0 without rewards
  bool truncated = false;
};

struct RolloutBatches {
  // [rows, T] each: inputs, targets (kIgnoredTarget off the completion), and the GRPO fields of
  // data::Batch (advantages, 0 without rewards; completion_mask, sampler_log_probs).
  std::vector<data::Batch> micro_batches;
  // [figure_names().size()] float32 on the device: the rollout's figures, the same for every
  // micro-batch of it.
  torch::Tensor figures;
  std::vector<ShownCompletion> shown;  // the first completion of every prompt
};

class Rollout {
 public:
  // Each rank makes its own prompts' rollout: a group never spans ranks, so that group scaling
  // needs nothing of the others (scale_rewards batch over several ranks is refused by the run).
  // `rewards`: GRPO's; null for distillation, whose rollout scores nothing.
  Rollout(RolloutSettings settings, const data::PromptDataset& prompts, const text::Tokenizer& tokenizer,
          reward::Rewards* rewards, models::Decoding decoding);

  // The completions of `prompts` (a loader batch: inputs [n] the prompts' indices), sampled at
  // generation `generation`, scored and laid out; throws RuntimeError naming the record for a
  // reward that cannot score it.
  RolloutBatches make(const data::Batch& prompts, int64_t generation);

  // With rewards: reward, reward_std, frac_reward_zero_std, rewards/<name>/mean each; then
  // completions/mean_length, completions/clipped_ratio (TRL's names).
  const std::vector<std::string>& figure_names() const { return figure_names_; }

 private:
  RolloutSettings settings_;
  const data::PromptDataset& prompts_;
  const text::Tokenizer& tokenizer_;
  reward::Rewards* rewards_;
  models::Decoding decoding_;
  std::vector<std::string> figure_names_;
};

}  // namespace ampt::train

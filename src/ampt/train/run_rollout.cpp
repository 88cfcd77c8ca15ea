#include "ampt/train/run.h"

#include "ampt/config/enum_names.h"
#include "ampt/core/errors.h"
#include "ampt/core/json_text.h"
#include "ampt/data/run_tokenizer.h"
#include "ampt/kernels/batch_invariant.h"
#include "ampt/train/distill_objective.h"
#include "ampt/train/grpo_objective.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>

namespace ampt::train {
namespace {

grpo::LossType loss_type(config::GrpoLossType type) {
  switch (type) {
    case config::GrpoLossType::grpo: return grpo::LossType::grpo;
    case config::GrpoLossType::dr_grpo: return grpo::LossType::dr_grpo;
    case config::GrpoLossType::dapo: return grpo::LossType::dapo;
    case config::GrpoLossType::bnpo: return grpo::LossType::bnpo;
  }
  return grpo::LossType::dapo;
}

grpo::SamplerCorrection sampler_correction(config::ImportanceSamplingMode mode) {
  switch (mode) {
    case config::ImportanceSamplingMode::token_truncate: return grpo::SamplerCorrection::token_truncate;
    case config::ImportanceSamplingMode::token_mask: return grpo::SamplerCorrection::token_mask;
    case config::ImportanceSamplingMode::sequence_truncate: return grpo::SamplerCorrection::sequence_truncate;
    case config::ImportanceSamplingMode::sequence_mask: return grpo::SamplerCorrection::sequence_mask;
  }
  return grpo::SamplerCorrection::sequence_mask;
}

// A forward of the exact sampler's mode: every operation batch-invariant (kernels/batch_invariant.h).
template <class Forward>
auto in_mode(bool exact, Forward&& forward) {
  const kernels::BatchInvariantScope mode(exact);
  return forward();
}

grpo::RewardScaling reward_scaling(config::ScaleRewards scaling) {
  switch (scaling) {
    case config::ScaleRewards::group: return grpo::RewardScaling::group;
    case config::ScaleRewards::batch: return grpo::RewardScaling::batch;
    case config::ScaleRewards::none: return grpo::RewardScaling::none;
  }
  return grpo::RewardScaling::group;
}

}  // namespace

int64_t Run::prompts_per_rollout() const {
  // config::resolve has checked that the groups are whole.
  return config_.batch_size * config_.grad_accum_steps / config_.num_generations;
}

void Run::set_up_rollout() {
  const auto objective = config::to_string(config_.objective);
  if (config_.scale_rewards == config::ScaleRewards::batch && dist_.world_size() > 1) {
    throw UsageError(fmt::format("scale_rewards batch divides by the reward std of every rank's "
                                 "completions, which {} ranks do not share yet: use group or none",
                                 dist_.world_size()));
  }
  if (config_.expert_parallel > 1) {
    throw UsageError(fmt::format("--objective {} samples each rank's prompts apart, and expert_parallel {} "
                                 "makes every forward an all_to_all among the ranks: drop expert_parallel",
                                 objective, config_.expert_parallel));
  }
  if (config_.sampler == config::Sampler::exact && !device_.device.is_cpu()) {
    throw UsageError(fmt::format("--sampler exact: the batch-invariant kernels run on the CPU only so far, "
                                 "and this run is on {}: use --sampler fast there",
                                 device_.device.str()));
  }
  auto tokenizer = data::run_tokenizer(config_);
  if (!tokenizer) {
    throw UsageError(fmt::format("--objective {} decodes its completions: name the tokenizer (--tokenizer PATH), "
                                 "or start from a pretrained model (--init_from)",
                                 objective));
  }
  const auto* prompts = dynamic_cast<const data::PromptDataset*>(splits_.train.get());
  if (prompts == nullptr) {
    throw RuntimeError(fmt::format("--objective {}: the training data are no prompt records", objective));
  }
  rollout_.reset(new RolloutParts{std::move(*tokenizer)});
  if (grpo()) {
    reward::RewardSettings rewards;
    rewards.spec = config_.reward;
    rewards.answer_field = config_.reward_answer_field;
    rewards.format_pattern = config_.reward_format;
    rewards.overlong_max = config_.max_completion_length;
    rewards.overlong_cache = config_.overlong_buffer;
    rewards.command = config_.reward_command;
    rewards.timeout_seconds = config_.reward_timeout;
    rollout_->rewards = std::make_unique<reward::Rewards>(rewards);
    // Every record is checked before the first step: a field a reward reads and lacks is a
    // startup error naming the record, not a failure after an hour of training.
    for (int64_t i = 0; i < prompts->size(); ++i) {
      rollout_->rewards->check_record(prompts->record(i).record, prompts->record(i).place);
    }
  }
  RolloutSettings settings;
  settings.generations = config_.num_generations;
  settings.rows_per_micro_batch = config_.batch_size;
  settings.sampling.max_new_tokens = config_.max_completion_length;
  settings.sampling.temperature = config_.temperature;
  settings.sampling.top_k = config_.top_k;
  settings.sampling.top_p = config_.top_p;
  settings.sampling.seed = static_cast<uint64_t>(config_.seed);
  // A completion ends at the tokenizer's EOS, and under a chat template at its end of turn too
  // (a base model's tokenizer ends text with <|endoftext|>, its template turns with <|im_end|>).
  settings.sampling.stop_tokens = {rollout_->tokenizer.eot_id()};
  if (const auto turn = prompts->end_of_turn(); turn && *turn != rollout_->tokenizer.eot_id()) {
    settings.sampling.stop_tokens.push_back(*turn);
  }
  settings.scaling = reward_scaling(config_.scale_rewards);
  settings.mask_truncated = config_.mask_truncated_completions;
  settings.keep_old_log_probs = config_.num_iterations > 1;
  settings.keep_reference = grpo() && config_.beta > 0;
  settings.keep_sampler_weights = grpo() && config_.sampler == config::Sampler::fast;
  settings.device = device_.device;
  const bool exact = config_.sampler == config::Sampler::exact;
  const models::Decoding decoding{
      [this, exact](const torch::Tensor& tokens, models::KvCache& cache) {
        return in_mode(exact, [&] { return policy_.next_logits(tokens, cache); });
      },
      policy_.model().context, device_.device};
  rollout_->rollout =
      std::make_unique<Rollout>(settings, *prompts, rollout_->tokenizer, rollout_->rewards.get(), decoding);
  if (dist_.rank() == 0) {
    std::filesystem::create_directories(config_.output_dir);
    rollout_->completions_path = (std::filesystem::path(config_.output_dir) / "completions.jsonl").string();
  }
}

std::shared_ptr<Objective> Run::make_grpo_objective(const ReferenceStart& reference) {
  grpo::LossSettings settings;
  settings.loss_type = loss_type(config_.loss_type);
  settings.epsilon_low = config_.epsilon;
  settings.epsilon_high = config_.epsilon_high;
  settings.beta = config_.beta;
  settings.importance_sampling_level = config_.importance_sampling_level == config::ImportanceSamplingLevel::token
                                           ? grpo::ImportanceLevel::token
                                           : grpo::ImportanceLevel::sequence;
  settings.max_completion_length = config_.max_completion_length;
  GrpoModels models;
  const bool exact = config_.sampler == config::Sampler::exact;
  models.policy = [this, exact](const data::Batch& batch) {
    return in_mode(exact, [&] { return policy_.logits(batch); });
  };
  if (config_.beta > 0) {
    auto [forward, description] = reference_forward(reference);
    models.reference = [exact, frozen = std::move(forward)](const data::Batch& batch) {
      return in_mode(exact, [&] { return frozen(batch); });
    };
    models.reference_description = std::move(description);
  }
  // The mode's spelling from the option's own names.
  models.sampler_description = exact ? "exact sampler"
                                     : fmt::format("fast sampler corrected ({} weights up to {})",
                                                   config::to_string(config_.importance_sampling_mode),
                                                   config_.importance_sampling_cap);
  std::optional<grpo::SamplerCorrectionSettings> correction;
  if (!exact) correction = grpo::SamplerCorrectionSettings{sampler_correction(config_.importance_sampling_mode), std::nullopt,
                                                           config_.importance_sampling_cap};
  auto objective = std::make_shared<GrpoObjective>(settings, config_.temperature, std::move(models),
                                                   rollout_->rollout->figure_names(), correction);
  rollout_->objective = objective.get();
  return objective;
}

std::shared_ptr<Objective> Run::make_distill_objective() {
  DistillModels models;
  const bool exact = config_.sampler == config::Sampler::exact;
  models.policy = [this, exact](const data::Batch& batch) {
    return in_mode(exact, [&] { return policy_.logits(batch); });
  };
  auto teacher = load_teacher(models.teacher_description);
  models.teacher = [this, exact, teacher](const data::Batch& batch) {
    return in_mode(exact, [&] { return policy_.compute([&] { return teacher->logits(batch); }); });
  };
  // Distillation weighs no token by an importance weight of its own: the exact ratio is 1, and
  // the fast sampler's enters the loss whole, as the cookbook's importance_sampling loss.
  models.sampler_description = exact ? "exact sampler" : "fast sampler (its importance ratios in the loss)";
  auto objective = std::make_shared<DistillObjective>(config_.temperature, std::move(models),
                                                      rollout_->rollout->figure_names());
  rollout_->objective = objective.get();
  return objective;
}

std::vector<data::Batch> Run::rollout_batches(int64_t step) {
  auto& parts = *rollout_;
  const int64_t iteration = step % config_.num_iterations;
  // A run resumed between a rollout's steps has not got it: it samples the next one.
  if (iteration != 0 && !parts.batches.empty()) {
    parts.objective->set_iteration(iteration);
    return parts.batches;
  }
  const auto prompts = progress_.batches->next();
  torch::NoGradGuard no_grad;
  policy_.model().module->eval();
  auto made = parts.rollout->make(prompts, step / config_.num_iterations);
  policy_.model().module->train();
  policy_.release_gathered();  // ZeRO-3: the root, held through the sampling
  parts.objective->begin_rollout(made.figures);
  parts.batches = std::move(made.micro_batches);
  if (!parts.completions_path.empty()) {
    std::ofstream out(parts.completions_path, std::ios::app);
    for (const auto& shown : made.shown) {
      // Distillation's rollout has no rewards: its completions are shown without them.
      const auto scored = parts.rewards ? fmt::format("\"reward\": {}, \"advantage\": {}, ",
                                                      json_number(shown.reward), json_number(shown.advantage))
                                        : std::string();
      out << fmt::format("{{\"step\": {}, \"prompt_index\": {}, \"prompt\": {}, \"completion\": {}, "
                         "{}\"truncated\": {}}}\n",
                         step + 1, shown.prompt, json_string(shown.prompt_text), json_string(shown.completion),
                         scored, shown.truncated);
    }
  }
  return parts.batches;
}

}  // namespace ampt::train

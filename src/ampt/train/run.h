// The state of one training run and the member functions that build, resume, evaluate and
// run it: trainer.cpp (the loop), run_setup.cpp (device, data, model, precision, the step),
// run_checkpoint.cpp (resume and save) and run_eval.cpp (losses and evaluation). Private to
// src/ampt/train: the rest of ampt calls run_training (trainer.h).
#pragma once

#include "ampt/checkpoint/checkpoint.h"
#include "ampt/checkpoint/checkpoint_reader.h"
#include "ampt/config/precision_schedule.h"
#include "ampt/core/named_tensors.h"
#include "ampt/data/loader.h"
#include "ampt/data/registry.h"
#include "ampt/device/device.h"
#include "ampt/distributed/data_parallel.h"
#include "ampt/kernels/target_check.h"
#include "ampt/log/events.h"
#include "ampt/models/registry.h"
#include "ampt/precision/precision_state.h"
#include "ampt/precision/stability_monitor.h"
#include "ampt/reward/rewards.h"
#include "ampt/text/tokenizer.h"
#include "ampt/train/checkpointer.h"
#include "ampt/train/clock.h"
#include "ampt/train/frozen_base.h"
#include "ampt/train/sampled_objective.h"
#include "ampt/train/objective.h"
#include "ampt/train/optimizer.h"
#include "ampt/train/policy.h"
#include "ampt/train/rollout.h"
#include "ampt/train/schedule.h"
#include "ampt/train/step.h"
#include "ampt/train/step_profiler.h"
#include "ampt/train/train_state.h"
#include "ampt/train/trainer.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ampt::train {

// Where the loop is and how it walks the data: the batch shape fitted to the split, the loader,
// the step counts and schedule, and what a checkpoint records of them beside the tensors.
struct Progress {
  // The config's batch_size and grad_accum_steps, fitted to data smaller than them.
  int64_t batch_size = 0;
  int64_t grad_accum_steps = 0;
  data::LoaderOptions loading;
  std::optional<data::Loader> batches;
  int64_t steps_per_epoch = 0;
  int64_t total_steps = 0;
  int64_t start_step = 0;
  LrSchedule schedule;
  double initial_loss = 0.0;
  torch::Tensor overflow_steps;  // counted on the device: a skipped step costs no sync
  // Time the loop spends evaluating: in the summary's split, and left out of throughput.
  double eval_seconds = 0.0;
};

// --objective grpo and distill: what their steps are made of (run_rollout.cpp): the tokenizer
// the completions are decoded with, GRPO's rewards (none for distill), the rollout, the run's
// objective as one that trains on rollouts, the current rollout's micro-batches (num_iterations
// steps train on them) and where completions.jsonl goes.
struct RolloutParts {
  text::Tokenizer tokenizer;
  std::unique_ptr<reward::Rewards> rewards;
  std::unique_ptr<Rollout> rollout;
  SampledObjective* objective = nullptr;
  std::vector<data::Batch> batches;
  std::string completions_path;  // empty on ranks other than 0
};

// What startup found, for the run's header (describe()).
struct StartupNotes {
  std::string pretrained;  // where the pretrained weights came from; empty: none
  std::string resume;
  std::vector<std::string> speed;
  std::vector<std::string> warnings;
};

// Everything one run holds, built once; run() is the loop. Its named parts: the Policy (policy.h:
// the model and its precision, precision::PrecisionState: stages, policy, loss scaler, islands,
// masters; every forward goes through it), the stability monitor, the TrainState (the optimizer,
// whole or over ZeRO's shards), a LoRA run's frozen base, the checkpointer; step_report() builds
// a logged step's line.
class Run {
 public:
  // Builds the run and resumes it when config.resume asks: a checkpoint is checked completely
  // before anything is written.
  Run(const config::Config& config, const RunContext& context, log::Observer& observer);

  // `started`: when run_training began, for the summary's startup time.
  log::RunSummary run(Clock::time_point started);

 private:
  // What dpo and ipo's reference model is made of, taken as training starts, before a resume
  // changes the weights: a full fine-tuning run's frozen copy of the model; a LoRA run that
  // continues a peft adapter, that adapter's starting weights (TRL's reference is the initial
  // adapter). Empty otherwise: a fresh adapter starts as its base, the adapters off. With
  // --precompute_ref_logps neither: the starting model's log-probabilities of every pair.
  struct ReferenceStart {
    std::shared_ptr<models::Model> model;
    NamedTensors adapters;
    torch::Tensor logps;  // [pairs, 2] by Batch::pair_ids
    std::string logps_note;
  };

  // run_setup.cpp
  // A training split smaller than one global batch trains in one batch of all of it (shared out
  // among the ranks): progress_.batch_size shrinks to it, and a warning says so.
  void fit_batch_to_split();
  // An epoch of fewer batches than grad_accum_steps accumulates all of them.
  void fit_accumulation_to_epoch();
  // TF32, channels-last, fp8 and CUDA graphs as configured; builds the step around the
  // objective (make_objective).
  void set_up_speed_features(const ReferenceStart& reference);
  // --fused_kernels: on or off as set; auto on a GPU decided here (fused_choice.h), with its
  // speed note (Policy::set_fused).
  void choose_fused_kernels();
  // On a GPU, the fused paths the run takes (the GPT's kernels, fp8's, the optimizer's), probed
  // and self-checked: a speed note, failed self-checks as warnings; a RuntimeError when fp8's
  // GEMM cannot run.
  void report_fused_paths();
  // fp8 for the layers --fp8_layers picks (measuring them for auto), its table in the notes.
  void use_fp8();
  // What --init_from fills: the checkpoint's model tensors and a LoRA run's frozen base.
  NamedTensors pretrained_targets() const;
  log::RunInfo describe() const;

  // run_checkpoint.cpp
  data::LoaderState restore(const std::string& path, std::string& note);
  // Where the data continues, carried over to this run's batch shape.
  data::LoaderState resume_position(const checkpoint::Checkpoint& saved, std::string& note) const;
  // Saves step `steps_done` through the checkpointer: what the TrainState holds, from the ranks
  // it says. `final`: the run's last save, waited for, and a failure throws instead of being
  // reported and trained past.
  void save_checkpoint(int64_t steps_done, log::RunSummary& summary, bool final);
  // The fields every checkpoint of this run has at `steps_done`, tensors left out.
  checkpoint::Checkpoint checkpoint_meta(int64_t steps_done) const;

  // run_objective.cpp
  // Whether the objective scores against a reference: dpo and ipo, grpo with beta > 0 (distill's
  // teacher is no reference: it is its own model, load_teacher's).
  bool uses_reference() const;
  // The reference's forward (logits, no gradients) and how the startup line names it: the frozen
  // copy, the continued adapter as it started, or the base with the adapters off.
  std::pair<std::function<torch::Tensor(const data::Batch&)>, std::string> reference_forward(
      const ReferenceStart& reference);
  // reference_start()'s, from ReferenceStart.
  ReferenceStart reference_start();
  // A frozen model that computes under the run's precision (a reference's copy, a teacher):
  // without gradients, in eval mode, its Linear weights held in the compute dtype where autocast
  // computes them in a half dtype (the same values at half the memory). Returns the dtype its
  // Linear weights are held in ("Float", "BFloat16").
  std::string hold_frozen(models::Model& model);
  // The model's (chosen, rejected) log-probabilities of every pair of both splits, as it is now,
  // [pairs, 2] on the device by Batch::pair_ids: read from the token cache where an earlier run
  // kept them (reference_cache.h), else computed and kept there; `note` says which, and how many
  // and how long it took.
  torch::Tensor reference_log_probs(std::string& note);
  // What the run minimises (objective.h): token cross-entropy (loss_of), or config.objective's
  // preference loss with its reference model. Throws UsageError for a preference objective the
  // run cannot take.
  std::shared_ptr<Objective> make_objective(const ReferenceStart& reference);
  // The sequences one sample is: a preference pair's two, else one (throughput and MFU).
  int64_t rows_per_sample() const { return splits_.spec.preference ? 2 : 1; }

  // run_rollout.cpp
  bool grpo() const { return config_.objective == config::Objective::grpo; }
  // grpo and distill: each step's micro-batches are a rollout's completions.
  bool samples() const { return config::samples_completions(config_.objective); }
  // The prompts of one rollout on this rank: batch_size x grad_accum_steps completions, in groups
  // of num_generations.
  int64_t prompts_per_rollout() const;
  // GRPO's rewards and the rollout on the loader's prompts, over the Policy's decode step; throws
  // UsageError for settings the run cannot take and RuntimeError for a prompt a reward cannot
  // score.
  void set_up_rollout();
  // The objective of --objective grpo, with its reference where beta > 0.
  std::shared_ptr<Objective> make_grpo_objective(const ReferenceStart& reference);
  // The objective of --objective distill, with its teacher (load_teacher).
  std::shared_ptr<Objective> make_distill_objective();

  // run_teacher.cpp
  // --objective distill's teacher: config.teacher's model, refused in one line where its
  // vocabulary or tokenizer is not the student's or its context too short for the completions,
  // loaded, frozen and held as --teacher_dtype says (hold_frozen, then quantized where it asks);
  // `description` names it and how it is held. Refused under ZeRO-3, which would hold it whole on
  // every rank.
  std::shared_ptr<models::Model> load_teacher(std::string& description);
  // Step `step`'s micro-batches: a new rollout's (sampled with the model in eval mode, its first
  // completions appended to completions.jsonl) every num_iterations steps, else the current
  // rollout's again.
  std::vector<data::Batch> rollout_batches(int64_t step);

  // run_eval.cpp
  // The batch's loss under the run's precision; with `correct`, also the count of right argmax
  // predictions (classifiers), which needs the logits; with `figures`, those of the auxiliary
  // losses it includes, where the model has them (Model::loss_terms).
  torch::Tensor loss_of(const data::Batch& batch, torch::Tensor* correct,
                        torch::Tensor* figures = nullptr);
  log::EvalReport evaluate(int64_t step);
  // The loss and the objective's figures over report.batches of `val`, means per unit.
  void evaluate_figures(data::Loader& val, log::EvalReport& report);

  // trainer.cpp
  // Switches to precision stage `index` (PrecisionState::enter_stage), announcing it unless the
  // run resumes into it.
  void enter_stage(std::size_t index, int64_t step, int64_t epoch, bool announce);
  void report_bad_steps(bool wait, int64_t steps_done, log::RunSummary& summary);
  [[noreturn]] void stop_unstable(const precision::BadStep& bad, int64_t steps_done,
                                  log::RunSummary& summary);
  // Saves step `steps_done` as a run's last checkpoint before it stops: "saved PATH", or why the
  // save failed.
  std::string save_before_stopping(int64_t steps_done, log::RunSummary& summary);
  // A step met targets outside the vocabulary: saves what the run has (the step was skipped) and
  // stops naming the first.
  [[noreturn]] void stop_bad_targets(const precision::BadStep& bad, int64_t steps_done,
                                     log::RunSummary& summary);

  const config::Config config_;
  const RunContext& context_;
  log::Observer& observer_;
  device::DeviceChoice device_;
  distributed::DataParallel dist_;
  data::DataSplits splits_;
  // The model, its precision and ZeRO-3's gathers: every forward of the run goes through it.
  Policy policy_;
  precision::StabilityMonitor monitor_;
  // The training step's target check, on the device (the monitor carries its record).
  kernels::TargetCheck target_check_;
  FrozenBase frozen_base_;
  // --precompute_ref_logps: the digest of the pairs its table is of, and the fingerprint of the
  // weights it is computed from, taken before ZeRO cuts them (reference_cache.h).
  std::string reference_data_, reference_weights_;
  // Built once the weights are loaded; it holds ZeRO-3's hooks, which the model calls.
  std::unique_ptr<TrainState> state_;
  Progress progress_;
  StartupNotes notes_;
  double peak_flops_ = 0.0;
  std::unique_ptr<TrainStep> step_;
  std::unique_ptr<RolloutParts> rollout_;  // --objective grpo and distill only
  // run()'s --profile, while it runs: the step tells its census of the gradients.
  StepProfiler* profiler_ = nullptr;
  // Last: destroyed first, it waits for a write in flight while the rest of the run still exists.
  Checkpointer checkpointer_;
};

}  // namespace ampt::train

// The state of one training run and the member functions that build, resume, evaluate and
// run it: trainer.cpp (the loop), run_setup.cpp (device, data, model, precision, the step),
// run_checkpoint.cpp (resume and save), run_zero.cpp (ZeRO's shards) and run_eval.cpp (losses
// and evaluation). Private to
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
#include "ampt/train/block_gather.h"
#include "ampt/train/checkpointer.h"
#include "ampt/train/optimizer.h"
#include "ampt/train/schedule.h"
#include "ampt/train/step.h"
#include "ampt/train/step_profiler.h"
#include "ampt/train/trainer.h"
#include "ampt/train/zero_optimizer.h"

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ampt::train {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Everything one run holds, built once; run() is the loop. Its named parts: the precision
// (precision::PrecisionState: stages, policy, loss scaler, islands, masters), the stability
// monitor, the optimizer (with ZeRO's shards), the checkpointer; step_report() builds a logged
// step's line.
class Run {
 public:
  // Builds the run and resumes it when config.resume asks: a checkpoint is checked completely
  // before anything is written.
  Run(const config::Config& config, const RunContext& context, log::Observer& observer);

  // `started`: when run_training began, for the summary's startup time.
  log::RunSummary run(Clock::time_point started);

 private:
  // run_setup.cpp
  // A training split smaller than one global batch trains in one batch of all of it (shared out
  // among the ranks): batch_size_ shrinks to it, and warnings_ says so.
  void fit_batch_to_split();
  // An epoch of fewer batches than grad_accum_steps accumulates all of them: grad_accum_steps_.
  void fit_accumulation_to_epoch();
  // TF32, channels-last, fp8 and CUDA graphs as configured; builds the step.
  void set_up_speed_features();
  // --fused_kernels: on or off as set; auto on a GPU decided here (fused_choice.h), with its
  // line in speed_notes_. Sets fused_kernels_.
  void choose_fused_kernels();
  // On a GPU, the fused paths the run takes (the GPT's kernels, fp8's, the AdamW kernel that
  // writes O1's half copies), probed and self-checked: a line in speed_notes_, failed
  // self-checks in warnings_; a RuntimeError when fp8's GEMM cannot run.
  void report_fused_paths();
  // fp8 for the layers --fp8_layers picks (measuring them for auto), its table in speed_notes_.
  void use_fp8();
  // Parameters (the fp32 masters under O2) and buffers: what a checkpoint holds of the model.
  // Under LoRA only the adapters train, and only they are saved.
  NamedTensors model_tensors() const;
  // What --init_from fills: model_tensors() and a LoRA run's frozen base.
  NamedTensors pretrained_targets() const;
  // Under LoRA: fingerprints the frozen base (before it is held in a half dtype), stores it in
  // its dtype and says so in lora_note_.
  void freeze_base();
  log::RunInfo describe() const;

  // run_checkpoint.cpp
  data::LoaderState restore(const std::string& path, std::string& note);
  // Where the data continues, carried over to this run's batch shape.
  data::LoaderState resume_position(const checkpoint::Checkpoint& saved, std::string& note) const;
  // The model tensors, then the optimizer's: what a snapshot copies.
  NamedTensors state_tensors() const;
  // Saves step `steps_done` through the checkpointer: rank 0 the whole state, or under ZeRO
  // every rank its shard. `final`: the run's last save, waited for, and a failure throws
  // instead of being reported and trained past.
  void save_checkpoint(int64_t steps_done, log::RunSummary& summary, bool final);
  // The fields every checkpoint of this run has at `steps_done`, tensors left out.
  checkpoint::Checkpoint checkpoint_meta(int64_t steps_done) const;

  // run_zero.cpp
  // Attaches the ranks with ZeRO: cuts this rank's shard of the masters (broadcast from rank 0
  // first), drops O2's full masters and builds the optimizer over the shard.
  void shard_state();
  // Copies this rank's pieces of the weights and optimizer state from `reader` (any checkpoint,
  // re-cut for this world size), and the buffers; all checked before anything changes.
  void restore_shards(checkpoint::CheckpointReader& reader);
  // What a ZeRO save snapshots: the master shard, the optimizer's flat state and (rank 0) the
  // buffers.
  NamedTensors shard_tensors() const;
  // The background write of this rank's shard of `meta`'s step from `host` (shard_tensors()'s
  // host copy).
  Checkpointer::Write shard_write(checkpoint::Checkpoint meta, const NamedTensors& host);
  // "[ZeRO] stage 2 over 4 ranks: ... bytes per parameter per rank"; empty without ZeRO.
  std::string zero_note() const;
  // Stage 3: refuses what it cannot shard (a model without blocks, LoRA) in one line.
  void check_zero3() const;
  // Stage 3: where each parameter belongs and the dtype it is gathered in.
  distributed::ParameterBlocks zero3_blocks() const;
  // Stage 3: the root gathered (the embeddings, final norm and head, which every forward reads
  // outside the blocks); a no-op below stage 3.
  void gather_root();
  // Stage 3: every gathered parameter released (after a step's backward, after an evaluation).
  void release_gathered();

  // run_eval.cpp
  // The batch's loss under the run's precision; with `correct`, also the count of right argmax
  // predictions (classifiers), which needs the logits.
  torch::Tensor loss_of(const data::Batch& batch, torch::Tensor* correct);
  log::EvalReport evaluate(int64_t step);

  // trainer.cpp
  // Switches to precision stage `index` (PrecisionState::enter_stage), announcing it unless the
  // run resumes into it.
  void enter_stage(std::size_t index, int64_t step, int64_t epoch, bool announce);
  void report_bad_steps(bool wait, int64_t steps_done, log::RunSummary& summary);
  [[noreturn]] void stop_unstable(const precision::BadStep& bad, int64_t steps_done,
                                  log::RunSummary& summary);
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
  models::Model model_;
  std::vector<torch::Tensor> parameters_;
  precision::PrecisionState precision_;
  precision::StabilityMonitor monitor_;
  // The training step's target check, on the device (the monitor carries its record).
  kernels::TargetCheck target_check_;
  std::unique_ptr<Optimizer> optimizer_;
  // ZeRO: the optimizer's state as flat tensors (ZeroOptimizer::state) and kinds, the
  // parameters' names and how many saves this run has started (each save's key).
  NamedTensors zero_state_;
  std::vector<StateKind> zero_kinds_;
  std::vector<std::string> parameter_names_;
  int64_t saves_started_ = 0;
  torch::Tensor overflow_steps_;  // counted on the device: a skipped step costs no sync
  // config_'s batch_size and grad_accum_steps, fitted to data smaller than them.
  int64_t batch_size_;
  int64_t grad_accum_steps_;
  data::LoaderOptions train_loading_;
  std::optional<data::Loader> batches_;
  int64_t steps_per_epoch_ = 0;
  int64_t total_steps_ = 0;
  LrSchedule schedule_;
  double peak_flops_ = 0.0;
  int64_t start_step_ = 0;
  double initial_loss_ = 0.0;
  std::string resume_note_;
  std::string pretrained_note_;  // where the pretrained weights came from; empty: none
  std::string base_fingerprint_;  // LoRA: the frozen base's (base_fingerprint.h); empty: none
  std::string lora_note_;         // LoRA: the startup line; empty: none
  std::vector<std::string> speed_notes_;
  bool fused_kernels_ = true;  // the model's fused operations are on (choose_fused_kernels)
  std::vector<std::string> warnings_;
  std::unique_ptr<TrainStep> step_;
  // run()'s --profile, while it runs: the step tells its census of the gradients.
  StepProfiler* profiler_ = nullptr;
  // ZeRO-3's hooks on the model's blocks; the model calls them until it is destroyed after them.
  std::unique_ptr<BlockGather> block_gather_;
  // Time the loop spends evaluating: in the summary's split, and left out of throughput.
  double eval_seconds_ = 0.0;
  // Last: destroyed first, it waits for a write in flight while the rest of the run still exists.
  Checkpointer checkpointer_;
};

}  // namespace ampt::train

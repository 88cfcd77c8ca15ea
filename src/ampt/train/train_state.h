// What a run trains beside its modules and what its checkpoints hold of it: the optimizer and its
// state over whole parameters, or under ZeRO (stages 1-3) over this rank's shard of them. Chosen
// once (make_train_state); the run's setup, step, resume and saves ask it and never the stage.
#pragma once

#include "ampt/checkpoint/checkpoint.h"
#include "ampt/checkpoint/checkpoint_reader.h"
#include "ampt/config/config.h"
#include "ampt/core/named_tensors.h"
#include "ampt/distributed/data_parallel.h"
#include "ampt/kernels/kernel_support.h"
#include "ampt/models/registry.h"
#include "ampt/precision/precision_state.h"
#include "ampt/precision/stability_monitor.h"
#include "ampt/train/checkpointer.h"
#include "ampt/train/optimizer.h"
#include "ampt/train/step.h"

#include <memory>
#include <string>
#include <vector>

namespace ampt::train {

// The run's parts a TrainState reads and attaches to; they outlive it.
struct TrainStateParts {
  const config::Config& config;
  distributed::DataParallel& dist;
  models::Model& model;
  const std::vector<torch::Tensor>& parameters;  // the trained ones, in the module's order
  precision::PrecisionState& precision;
  precision::StabilityMonitor& monitor;
};

class TrainState {
 public:
  virtual ~TrainState() = default;

  const Optimizer& optimizer() const { return *optimizer_; }

  // What a save snapshots, in the order write() reads its host copy.
  virtual NamedTensors tensors() const = 0;
  // Copies the weights and optimizer state from `reader` (a whole checkpoint, or shards re-cut
  // for this world size), all checked before anything changes; the half weights follow them.
  virtual void restore(checkpoint::CheckpointReader& reader) = 0;
  // The path this rank writes step `step`'s checkpoint to under `dir`; empty: it writes none.
  virtual std::string save_path(const std::string& dir, int64_t step) const = 0;
  // The background write of `meta`'s checkpoint from `host`, tensors()'s host copy.
  virtual Checkpointer::Write write(checkpoint::Checkpoint meta, NamedTensors host) = 0;

  // The step's optimizer, masters and shards.
  virtual void step_parts(StepParts& parts) = 0;
  // The fused paths the optimizer takes on a GPU (report_fused_paths probes them).
  virtual std::vector<kernels::FusedPath> fused_paths() const = 0;
  // Whether every rank takes part in each forward: ZeRO-3 gathers each block inside it.
  virtual bool forward_is_collective() const { return false; }
  // After the precision stage changed (PrecisionState::enter_stage).
  virtual void precision_changed() {}
  // The startup's "[ZeRO]" line; empty: none.
  virtual std::string note() const = 0;
  // What the distributed line adds (expert parallelism's division of the experts); empty: none.
  virtual std::string parallel_note() const { return ""; }

 protected:
  explicit TrainState(TrainStateParts parts) : parts_(parts) {}
  TrainStateParts parts_;
  std::unique_ptr<Optimizer> optimizer_;
};

// The model's tensors a checkpoint holds: the trained parameters (the fp32 masters under O2; a
// LoRA run's adapters only) and the buffers.
NamedTensors model_tensors(const precision::PrecisionState& precision, const models::Model& model);

// What make_train_state would refuse, checked before the run loads any weights: a UsageError,
// one line, for a combination the ZeRO stage cannot run.
void check_train_state(const TrainStateParts& parts);

// Whole under zero_stage 0 or in a single process, else sharded; attached to the ranks (the
// model's tensors broadcast from rank 0) and its optimizer built.
std::unique_ptr<TrainState> make_train_state(TrainStateParts parts);

// The two kinds make_train_state chooses between (whole_state.cpp, sharded_state.cpp).
std::unique_ptr<TrainState> make_whole_state(TrainStateParts parts);
std::unique_ptr<TrainState> make_sharded_state(TrainStateParts parts);

}  // namespace ampt::train

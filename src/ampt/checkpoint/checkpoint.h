// Training checkpoints: everything needed to continue a run exactly, saved atomically.
#pragma once

#include "ampt/core/named_tensors.h"

#include <torch/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace ampt::checkpoint {

// Checkpoints written by this build; a reader refuses newer ones.
inline constexpr int64_t kFormatVersion = 1;

// The loss scaler's state as a checkpoint holds it (precision::LossScalerState's values).
struct SavedScaler {
  float scale = 1.0F;
  int32_t growth_tracker = 0;
  int32_t hysteresis = 0;  // 0 in checkpoints from before hysteresis existed: start it full
};

// The state of a run after `step` optimizer steps. Tensors are on the CPU; model weights fp32
// whatever precision the run trained in, so any precision can resume from any other.
struct Checkpoint {
  int64_t format_version = kFormatVersion;
  std::string ampt_version;
  std::string git_revision;
  std::string config;  // the resolved configuration, as `ampt config` prints it
  // The run's --objective ("lm", "grpo", ...): a checkpoint resumes only a run of its own
  // objective. Empty in checkpoints written before it was recorded.
  std::string objective;

  int64_t step = 0;           // optimizer steps completed
  int64_t data_epoch = 0;     // where the next batch comes from
  int64_t data_position = 0;  // batches already taken from that epoch
  // The shape of those batches: global batches of batch_size x world_size samples; 0 in
  // checkpoints written before they were recorded.
  int64_t batch_size = 0;
  int64_t world_size = 0;
  int64_t skipped_steps = 0;
  double initial_loss = 0.0;  // the run's step-1 loss, for the summary

  NamedTensors model;
  std::string optimizer_kind;  // "adamw", "sgd"
  NamedTensors optimizer;      // "<parameter>.<state>"
  std::optional<SavedScaler> scaler;  // only when the run used loss scaling
  torch::Tensor cpu_rng;
  torch::Tensor cuda_rng;  // undefined when the run was on the CPU
  // LoRA runs: `model` holds only the adapters; the frozen base they were trained on is
  // init_from's (`base_model`, empty for a random one) with this fingerprint
  // (train/base_fingerprint.h). Both empty without LoRA.
  std::string base_model;
  std::string base_fingerprint;
  // A run with --precompute_ref_logps: the digest of the preference pairs its reference
  // log-probabilities were of (train/reference_cache.h); empty otherwise.
  std::string reference_data;
};

// "ckpt-00000050.pt"
std::string checkpoint_file_name(int64_t step);
// "ckpt-00000050": a sharded (ZeRO) checkpoint's directory (sharded_save.h).
std::string checkpoint_dir_name(int64_t step);

// Writes <directory>/ckpt-<step>.pt (a torch zip archive: tensor_archive.h) and then the
// `latest` pointer, both atomically, then deletes the oldest checkpoints beyond the newest
// `keep`, never the one just written. Host tensors that span their storage (a HostSnapshot's)
// are written in place; others are copied first. Returns the checkpoint's path. Safe to run on
// a background thread while training goes on, given tensors no step writes to.
std::string save(const std::string& directory, const Checkpoint& checkpoint, int64_t keep);

// Writes `checkpoint` to `path` as save does, atomically, and nothing else (a sharded
// checkpoint's common file is one, without parameters or optimizer state).
void write_checkpoint_file(const std::string& path, const Checkpoint& checkpoint);

// Reads and checks a checkpoint; RuntimeError naming the file when it is missing, truncated,
// corrupt, not an ampt checkpoint, or from a newer format version. The tensors are read-only
// views of the file mapped into memory (no copy; see read_tensor_archive). Checkpoints written
// by torch::pickle_save (ampt before its own writer) read the same way. A run directory, or its
// `latest` file, stands for the checkpoint `latest` points to. A sharded checkpoint is
// assembled whole from its shards (CheckpointReader::assemble).
Checkpoint load(const std::string& path);
// Only an ordinary checkpoint file (what load reads when `path` is not sharded).
Checkpoint load_file(const std::string& path);

// The checkpoint `path` names: itself, or for a run directory or its `latest` file the
// checkpoint `latest` points to. RuntimeError when there is none.
std::string resolve_path(const std::string& path);
// Whether `path` (resolved) is a sharded checkpoint's directory.
bool is_sharded(const std::string& path);

// Deletes the oldest checkpoints (files and sharded directories) in `directory` beyond the
// newest `keep`, never `newest`, whatever the others' steps.
void remove_old_checkpoints(const std::string& directory, const std::string& newest, int64_t keep);

// Points `directory`'s `latest` file at `name`, a checkpoint file or directory in it,
// atomically.
void write_latest(const std::string& directory, const std::string& name);

// The checkpoint `latest` in `directory` points to, if there is one.
std::optional<std::string> find_latest(const std::string& directory);

// Copies `saved` into `targets` (matched by name) after checking that the names and shapes
// agree: RuntimeError naming the file, the tensor, and the expected and found shapes.
void copy_into(const NamedTensors& saved, const NamedTensors& targets, const std::string& what,
               const std::string& path);

// copy_into's checks for tensors that arrive one at a time (a pretrained model read a shard at a
// time), with its lines: target() for each tensor as it comes, finish() once all have.
class TensorMatch {
 public:
  TensorMatch(const NamedTensors& targets, std::string what, std::string path);
  // The target `name` names, whose shape is `tensor`'s; RuntimeError where there is none or its
  // shape differs.
  const torch::Tensor& target(const std::string& name, const torch::Tensor& tensor);
  // RuntimeError naming a target that no tensor came for.
  void finish() const;

 private:
  std::map<std::string, torch::Tensor> targets_;
  std::set<std::string> matched_;
  std::string what_, path_;
};

}  // namespace ampt::checkpoint

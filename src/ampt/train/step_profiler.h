// --profile: LibTorch's own profiler (Kineto) around a range of optimizer steps. The trace opens in
// Perfetto or chrome://tracing with ampt's step phases as named ranges (step.h names them); the
// table beside it lists every operator and kernel with its calls and time per step. Each step in
// the range is also counted by the step census (step_census.h), one JSON line per step in a
// third file.
#pragma once

#include "ampt/config/step_range.h"
#include "ampt/train/step_census.h"

#include <c10/core/Device.h>

#include <optional>
#include <string>

namespace ampt::train {

// What a finished profile wrote.
struct ProfileFiles {
  config::StepRange steps;  // the steps traced (the range, cut short if the run ended first)
  std::string trace;        // Chrome trace JSON
  std::string table;        // operators per step, text
  std::string census;       // the step census, a JSON line per step
};

class StepProfiler {
 public:
  // `range` empty: does nothing. Files go to `output_dir`/profile-steps-A-B.{json,txt} and
  // profile-steps-A-B.census.jsonl, with `.rankN` before the extension on ranks other than 0 of
  // a distributed run. `parameters`: the model's, for the census.
  StepProfiler(std::optional<config::StepRange> range, std::string output_dir, c10::Device device,
               int64_t rank, std::vector<torch::Tensor> parameters);
  ~StepProfiler();
  StepProfiler(const StepProfiler&) = delete;
  StepProfiler& operator=(const StepProfiler&) = delete;

  // Around optimizer step `step` (1-based).
  void before_step(int64_t step);
  // Backward has made this step's gradients (for the census).
  void gradients_ready(const std::vector<torch::Tensor>& gradients);
  // Whether a step is being counted now.
  bool counting() const { return counting_; }
  // The census of step `step`, once it is done (written to the census file), if it was counted.
  std::optional<StepCensus> take_census(int64_t step);
  // Returns the files once the range's last step is done.
  std::optional<ProfileFiles> after_step(int64_t step);
  // The run ends at `last_step` (finished or stopped): a trace still open is written.
  std::optional<ProfileFiles> finish(int64_t last_step);

 private:
  ProfileFiles stop(int64_t last_step);
  std::string base_path(const config::StepRange& steps, const std::string& extension) const;

  std::optional<config::StepRange> range_;
  std::string output_dir_;
  c10::Device device_;
  int64_t rank_;
  int64_t first_traced_ = 0;  // 0: not tracing
  bool done_ = false;
  std::optional<StepCensusRecorder> census_;
  bool counting_ = false;
  std::vector<std::string> census_lines_;  // the range's, written with the trace
};

// The operator table of a profile: per name and device (CPU operator, CUDA kernel, ampt phase),
// calls and inclusive milliseconds per step, the most expensive first. Exposed for its test.
struct OpRow {
  std::string name;
  std::string kind;  // "phase", "cpu", "cuda"
  double calls_per_step = 0.0;
  double ms_per_step = 0.0;
};
std::string op_table_text(const std::vector<OpRow>& rows, const config::StepRange& steps);

}  // namespace ampt::train

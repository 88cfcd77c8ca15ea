// --profile: LibTorch's own profiler (Kineto) around a range of optimizer steps. The trace opens in
// Perfetto or chrome://tracing with ampt's step phases as named ranges (step.h names them); the
// table beside it lists every operator and kernel with its calls and time per step.
#pragma once

#include "ampt/config/step_range.h"

#include <c10/core/Device.h>

#include <optional>
#include <string>

namespace ampt::train {

// What a finished profile wrote.
struct ProfileFiles {
  config::StepRange steps;  // the steps traced (the range, cut short if the run ended first)
  std::string trace;        // Chrome trace JSON
  std::string table;        // operators per step, text
};

class StepProfiler {
 public:
  // `range` empty: does nothing. Files go to `output_dir`/profile-steps-A-B.{json,txt}, with
  // `.rankN` before the extension on ranks other than 0 of a distributed run.
  StepProfiler(std::optional<config::StepRange> range, std::string output_dir, c10::Device device,
               int64_t rank);
  ~StepProfiler();
  StepProfiler(const StepProfiler&) = delete;
  StepProfiler& operator=(const StepProfiler&) = delete;

  // Around optimizer step `step` (1-based).
  void before_step(int64_t step);
  // Returns the files once the range's last step is done.
  std::optional<ProfileFiles> after_step(int64_t step);
  // The run ends at `last_step` (finished or stopped): a trace still open is written.
  std::optional<ProfileFiles> finish(int64_t last_step);

 private:
  ProfileFiles stop(int64_t last_step);

  std::optional<config::StepRange> range_;
  std::string output_dir_;
  c10::Device device_;
  int64_t rank_;
  int64_t first_traced_ = 0;  // 0: not tracing
  bool done_ = false;
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

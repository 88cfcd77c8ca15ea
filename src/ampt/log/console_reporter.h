// Prints a run to the console: the startup block, one line per logged step, the summary.
#pragma once

#include "ampt/log/events.h"

#include <string>

namespace ampt::log {

class ConsoleReporter final : public Observer {
 public:
  // `progress_bar`: draw a progress bar with ETA (for a terminal; Slurm logs get plain lines).
  // `metrics_path` is named in the summary.
  ConsoleReporter(bool progress_bar, std::string metrics_path);

  void on_data_progress(int64_t done, int64_t total, double elapsed_seconds) override;
  void on_start(const RunInfo& info) override;
  void on_progress(int64_t step, int64_t total_steps, double elapsed_seconds) override;
  void on_step(const StepReport& report) override;
  void on_eval(const EvalReport& report) override;
  void on_precision_switch(const PrecisionSwitch& change) override;
  void on_checkpoint(const CheckpointReport& report) override;
  void on_census(const StepCensusReport& census) override;
  void on_profile(int64_t first, int64_t last, const std::string& trace,
                  const std::string& table, const std::string& census) override;
  void on_nonfinite(int64_t step, const std::string& what) override;
  void on_end(const RunSummary& summary) override;

 private:
  bool progress_bar_;
  std::string metrics_path_;
  double last_draw_ = -1.0;
  bool language_model_ = false;  // throughput in tokens
};

// "312.4 MiB"
std::string format_bytes(int64_t bytes);

}  // namespace ampt::log

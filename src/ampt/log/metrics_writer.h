// Writes one JSON object per logged step to <output_dir>/metrics.jsonl, and summary.json.
#pragma once

#include "ampt/log/events.h"

#include <fstream>
#include <string>

namespace ampt::log {

// Nothing is written before on_start, so a run that fails while setting up (a bad checkpoint,
// say) leaves output_dir as it was.
class MetricsWriter final : public Observer {
 public:
  // `write_steps` false (--report_to without jsonl): summary.json only.
  explicit MetricsWriter(const std::string& output_dir, bool write_steps = true);

  // metrics.jsonl; empty when the writer writes no steps.
  const std::string& path() const { return path_; }

  // Creates output_dir. A fresh run keeps an earlier run's metrics.jsonl as metrics.N.jsonl;
  // a resumed run continues the file, dropping lines past the step it resumed from (they were
  // logged after the checkpoint and will be logged again).
  void on_start(const RunInfo& info) override;
  void on_step(const StepReport& report) override;
  void on_eval(const EvalReport& report) override;
  // {"step": 500, "event": "precision_switch", "from": "FP32", "to": "BF16", ...}
  void on_precision_switch(const PrecisionSwitch& change) override;
  // {"step": 500, "event": "checkpoint", "path": ..., "bytes": ..., "pause_seconds": ...,
  // "wait_seconds": ..., "write_seconds": ..., "error": null}
  void on_checkpoint(const CheckpointReport& report) override;
  void on_end(const RunSummary& summary) override;

 private:
  void keep_earlier_run() const;
  void keep_lines_up_to(int64_t step) const;

  std::string output_dir_;
  std::string path_;
  std::ofstream out_;
};

}  // namespace ampt::log

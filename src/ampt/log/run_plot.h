// A picture of a run, drawn from its metrics.jsonl: one SVG (no library needed, any browser
// opens it) with train and validation loss, learning rate, loss scale and throughput against
// the step, the precision switches and the logged steps that saw skipped optimizer steps marked.
#pragma once

#include "ampt/log/events.h"
#include "ampt/log/metrics_file.h"

#include <string>
#include <vector>

namespace ampt::log {

// The SVG document. Each curve is one <polyline> with an id (train-loss, val-loss, lr,
// loss-scale, throughput) and a point per finite logged value; the marks are <line>s in the
// groups precision-switches and skipped-steps. Throws RuntimeError when `records` hold no
// logged step.
std::string plot_svg(const std::vector<MetricsRecord>& records, const std::string& title);

// Draws <run_dir>/metrics.jsonl to `out` (<run_dir>/run.svg when empty); returns the path
// written. Throws RuntimeError naming what is missing.
std::string write_run_plot(const std::string& run_dir, const std::string& out = "");

// --report_to plot: draws the run when it ends (finished or stopped by a signal).
class PlotAtEnd final : public Observer {
 public:
  explicit PlotAtEnd(std::string run_dir) : run_dir_(std::move(run_dir)) {}
  void on_end(const RunSummary& summary) override;

 private:
  std::string run_dir_;
};

}  // namespace ampt::log

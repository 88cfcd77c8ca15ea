// Writes one JSON object per logged step to <output_dir>/metrics.jsonl, and summary.json.
#pragma once

#include "ampt/train/events.h"

#include <fstream>
#include <string>

namespace ampt::log {

class MetricsWriter final : public train::Observer {
 public:
  // Creates output_dir; a metrics.jsonl left by an earlier run is kept, renamed to
  // metrics.N.jsonl, never overwritten.
  explicit MetricsWriter(const std::string& output_dir);

  const std::string& path() const { return path_; }

  void on_step(const train::StepReport& report) override;
  void on_end(const train::RunSummary& summary) override;

 private:
  std::string output_dir_;
  std::string path_;
  std::ofstream out_;
};

}  // namespace ampt::log

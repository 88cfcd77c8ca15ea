// Writes <output_dir>/metrics.csv as PyTorch Lightning's CSVLogger does (matched against
// lightning 2.6, lightning_fabric/loggers/csv_logs.py and the trainer's logger connector).
#pragma once

#include "ampt/log/events.h"
#include "ampt/log/scalars.h"

#include <string>
#include <vector>

namespace ampt::log {

// One row per set of values logged together (a step, an evaluation, a precision switch), under
// the names of scalars.h plus `epoch` and `step`. The columns are the sorted names seen so far;
// a row leaves the cells of names it lacks empty. When a name first appears (the first
// evaluation, say) the whole file is rewritten under the wider header, as Lightning does.
class CsvWriter final : public Observer {
 public:
  explicit CsvWriter(const std::string& output_dir);

  // A fresh run keeps an earlier run's metrics.csv as metrics.N.csv; a resumed run keeps the
  // rows up to the step it resumed from and continues the file.
  void on_start(const RunInfo& info) override;
  void on_step(const StepReport& report) override;
  void on_eval(const EvalReport& report) override;
  void on_precision_switch(const PrecisionSwitch& change) override;

 private:
  void add_row(const std::vector<Scalar>& values, int64_t step, int64_t epoch);

  std::string path_;
  RunInfo run_;
  std::vector<std::string> columns_;  // sorted; empty until the file has a header
};

}  // namespace ampt::log

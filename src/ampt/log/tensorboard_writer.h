// Writes a run's scalars and its configuration as TensorBoard event files in <output_dir>/tb/,
// natively (TensorFlow's record framing around hand-encoded Event protos), flushed at every
// event so that whatever stops the process leaves every earlier event readable.
#pragma once

#include "ampt/log/events.h"

#include <fstream>
#include <string>

namespace ampt::log {

class TensorBoardWriter final : public Observer {
 public:
  // `config_text`: the resolved configuration (ampt config's listing), stored once per run
  // under the text tag "config".
  TensorBoardWriter(const std::string& output_dir, std::string config_text);

  const std::string& path() const { return path_; }  // the event file; empty before on_start

  // A fresh run keeps an earlier run's tb/ as tb.N/ and starts a new file
  // events.out.tfevents.<time>.<host>.<pid>.0. A resumed run rewrites the event files without
  // what was logged after its checkpoint's step (and a record cut short) and continues the
  // newest, so every tag keeps one value per step.
  void on_start(const RunInfo& info) override;
  void on_step(const StepReport& report) override;
  void on_eval(const EvalReport& report) override;
  void on_precision_switch(const PrecisionSwitch& change) override;

 private:
  void continue_files(int64_t start_step);
  void write(const std::string& event);

  std::string dir_;
  std::string config_text_;
  std::string path_;
  RunInfo run_;
  std::ofstream out_;
};

}  // namespace ampt::log

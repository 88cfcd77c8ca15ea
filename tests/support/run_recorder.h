// An Observer that keeps what a training run reports, for tests to read afterwards.
#pragma once

#include "ampt/log/events.h"

#include <vector>

namespace ampt::test {

struct Recorder final : log::Observer {
  log::RunInfo info;
  std::vector<log::StepReport> steps;
  std::vector<double> losses;  // each step's
  std::vector<log::PrecisionSwitch> switches;
  std::vector<log::CheckpointReport> saves;

  void on_start(const log::RunInfo& i) override { info = i; }
  void on_step(const log::StepReport& r) override {
    steps.push_back(r);
    losses.push_back(r.loss);
  }
  void on_precision_switch(const log::PrecisionSwitch& c) override { switches.push_back(c); }
  void on_checkpoint(const log::CheckpointReport& r) override { saves.push_back(r); }
};

}  // namespace ampt::test

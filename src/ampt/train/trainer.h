// The training loop: forward under autocast → scaled backward → unscale and inf check → clip →
// optimizer step (or skip, decided on the device) → scaler update → checkpoints.
#pragma once

#include "ampt/config/config.h"
#include "ampt/log/events.h"

#include <functional>
#include <string>

namespace ampt::train {

// What the run needs from its caller besides the configuration.
struct RunContext {
  std::string precision_source;  // where mixed_precision was set, for the startup block
  std::string config_text;       // the resolved configuration, stored in checkpoints
  // Polled after every step: non-zero (a signal number) asks the run to save and return.
  std::function<int()> stop_requested = [] { return 0; };
};

// Trains the configured model (resuming first when config.resume asks for it) and returns the
// end-of-run summary, reporting to `observer`. A checkpoint is checked completely before
// anything is written. The only host synchronisations are on logged and saved steps.
log::RunSummary run_training(const config::Config& config, const RunContext& context,
                        log::Observer& observer);

}  // namespace ampt::train

// The training loop: forward under autocast → scaled backward → unscale and inf check → clip →
// optimizer step (or skip, decided on the device) → scaler update.
#pragma once

#include "ampt/config/config.h"
#include "ampt/train/events.h"

#include <string>

namespace ampt::train {

// Trains the configured model and returns the end-of-run summary; reports progress to
// `observer`. `precision_source` says where mixed_precision was set (for the startup block).
// The only host synchronisations are on logged steps.
RunSummary run_training(const config::Config& config, const std::string& precision_source,
                        Observer& observer);

}  // namespace ampt::train

// The run's events as named scalars (train/loss, amp/loss_scale, ...): the one naming that the
// TensorBoard tags and the metrics.csv columns share.
#pragma once

#include "ampt/log/events.h"

#include <string>
#include <vector>

namespace ampt::log {

struct Scalar {
  std::string name;
  double value = 0.0;
  bool integer = false;  // a count or an index (CSV writes it without a decimal point)
};

// A logged step: train/loss, train/lr, train/grad_norm, epoch, perf/samples_per_sec (or
// perf/tokens_per_sec for language models), perf/mfu (when the device's peak is known),
// memory/peak_bytes, amp/overflows, amp/skipped_steps, and when they apply amp/grad_underflow,
// amp/loss_scale, amp/growth_tracker, amp/hysteresis; an objective's figures as train/NAME
// (train/rewards/chosen).
std::vector<Scalar> step_scalars(const StepReport& report, const RunInfo& run);

// val/loss and val/accuracy (classifiers) or val/perplexity (language models); with an
// objective's figures, val/loss and val/NAME instead.
std::vector<Scalar> eval_scalars(const EvalReport& report);

// precision/stage: the 1-based stage a precision_schedule switched to.
Scalar stage_scalar(const PrecisionSwitch& change);

}  // namespace ampt::log

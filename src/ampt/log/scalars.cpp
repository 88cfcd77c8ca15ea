#include "ampt/log/scalars.h"

namespace ampt::log {
namespace {

Scalar count(std::string name, int64_t value) {
  return {std::move(name), static_cast<double>(value), true};
}

}  // namespace

std::vector<Scalar> step_scalars(const StepReport& r, const RunInfo& run) {
  std::vector<Scalar> values = {
      {"train/loss", r.loss},
      {"train/lr", r.lr},
      {"train/grad_norm", r.grad_norm},
      count("epoch", r.epoch),
      run.language_model ? Scalar{"perf/tokens_per_sec", r.tokens_per_sec}
                         : Scalar{"perf/samples_per_sec", r.samples_per_sec},
  };
  if (run.peak_flops > 0.0) values.push_back({"perf/mfu", r.mfu});
  values.push_back(count("memory/peak_bytes", r.peak_memory_bytes));
  values.push_back(count("amp/overflows", r.overflows));
  values.push_back(count("amp/skipped_steps", r.skipped_steps));
  if (r.grad_underflow >= 0.0) values.push_back({"amp/grad_underflow", r.grad_underflow});
  if (r.loss_scaling) {
    values.push_back({"amp/loss_scale", r.scale});
    values.push_back(count("amp/growth_tracker", r.growth_tracker));
  }
  if (r.hysteresis >= 0) values.push_back(count("amp/hysteresis", r.hysteresis));
  for (const auto& [name, value] : r.figures) values.push_back({"train/" + name, value});
  return values;
}

std::vector<Scalar> eval_scalars(const EvalReport& r) {
  if (!r.figures.empty()) {
    std::vector<Scalar> values = {{"val/loss", r.loss}};
    for (const auto& [name, value] : r.figures) values.push_back({"val/" + name, value});
    return values;
  }
  if (r.perplexity >= 0.0) return {{"val/loss", r.loss}, {"val/perplexity", r.perplexity}};
  return {{"val/loss", r.loss}, {"val/accuracy", r.accuracy}};
}

Scalar stage_scalar(const PrecisionSwitch& change) { return count("precision/stage", change.stage); }

}  // namespace ampt::log

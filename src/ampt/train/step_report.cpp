#include "ampt/train/step_report.h"

#include "ampt/device/device.h"

namespace ampt::train {

log::StepReport step_report(const StepResult& result, const StepFacts& facts,
                            const std::function<double()>& throughput,
                            const precision::LossScaler& scaler,
                            const torch::Tensor& overflow_steps,
                            distributed::DataParallel& dist, const c10::Device& device) {
  log::StepReport report;
  report.step = facts.step;
  report.total_steps = facts.total_steps;
  report.epoch = facts.epoch;
  report.loss = dist.mean(result.loss).item<double>();
  report.lr = facts.lr;
  report.grad_norm = result.grad_norm.item<double>();
  report.samples_per_sec = throughput();
  report.tokens_per_sec = report.samples_per_sec * static_cast<double>(facts.tokens_per_sample);
  if (facts.peak_flops > 0.0) {
    report.mfu = report.samples_per_sec * static_cast<double>(facts.flops_per_sample) / facts.peak_flops;
  }
  std::string memory_kind;
  report.peak_memory_bytes = device::peak_memory_bytes(device, memory_kind);
  const auto scaler_state = scaler.state();
  report.loss_scaling = scaler.enabled();
  report.scale = scaler_state.scale;
  report.growth_tracker = scaler_state.growth_tracker;
  report.overflows = static_cast<int64_t>(overflow_steps.item<double>());
  report.skipped_steps = report.overflows;
  if (scaler.enabled() && facts.hysteresis) report.hysteresis = scaler_state.hysteresis;
  if (result.underflow.defined()) {
    const auto counts = result.underflow.cpu();
    const double nonzero = counts[1].item<double>();
    report.grad_underflow = nonzero > 0.0 ? counts[0].item<double>() / nonzero : 0.0;
  }
  if (result.figures.defined() && facts.figure_names != nullptr) {
    const auto values = dist.mean(result.figures).to(torch::kCPU, torch::kFloat64);
    for (std::size_t i = 0; i < facts.figure_names->size(); ++i) {
      report.figures.emplace_back((*facts.figure_names)[i],
                                  values[static_cast<int64_t>(i)].item<double>());
    }
  }
  return report;
}

}  // namespace ampt::train

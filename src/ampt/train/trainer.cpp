#include "ampt/train/trainer.h"

#include "ampt/core/errors.h"
#include "ampt/data/batch_iterator.h"
#include "ampt/data/synthetic.h"
#include "ampt/models/registry.h"
#include "ampt/precision/autocast_guard.h"
#include "ampt/precision/loss_scaler.h"
#include "ampt/precision/policy.h"
#include "ampt/train/device.h"
#include "ampt/train/grad_clip.h"
#include "ampt/train/optimizer.h"
#include "ampt/train/schedule.h"

#include <ATen/ops/_foreach_zero.h>
#include <fmt/format.h>
#include <torch/nn/functional/loss.h>

#include <chrono>

namespace ampt::train {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::vector<torch::Tensor> defined_grads(const std::vector<torch::Tensor>& params) {
  std::vector<torch::Tensor> grads;
  for (const auto& p : params) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  return grads;
}

}  // namespace

RunSummary run_training(const config::Config& config, const std::string& precision_source,
                        Observer& observer) {
  if (config.dataset != "synthetic") {
    throw UsageError("unknown dataset '" + config.dataset + "': expected one of synthetic");
  }
  const auto device = select_device(config.device);
  torch::manual_seed(config.seed);
  const data::SyntheticClassification dataset(config.synthetic_samples, config.synthetic_features,
                                              config.synthetic_classes, config.seed);
  auto model = models::make_model(
      config, {data::Task::classification, {dataset.features}, dataset.classes});
  model.module->to(device.device);
  model.module->train();
  const auto parameters = model.module->parameters();

  const auto policy = precision::make_policy(config.mixed_precision, config.amp_opt_level);
  precision::LossScaler scaler({policy.loss_scaling, config.grad_scaler_init,
                                config.grad_scaler_growth_factor, config.grad_scaler_backoff,
                                config.grad_scaler_growth_interval},
                               device.device);
  auto optimizer = make_optimizer(config, parameters);
  data::BatchIterator batches(dataset.inputs, dataset.targets, config.batch_size,
                              static_cast<uint64_t>(config.seed) + 1, device.device);

  const int64_t steps_per_epoch = batches.batches_per_epoch() / config.grad_accum_steps;
  if (steps_per_epoch == 0) {
    throw RuntimeError(fmt::format(
        "an epoch has {} batches of {}, fewer than grad_accum_steps {}: lower grad_accum_steps or "
        "batch_size",
        batches.batches_per_epoch(), config.batch_size, config.grad_accum_steps));
  }
  const int64_t total_steps =
      config.max_steps > 0 ? config.max_steps : config.epochs * steps_per_epoch;
  const LrSchedule schedule{config.lr, config.lr * config.min_lr_ratio, config.warmup_steps,
                            total_steps};
  const int64_t samples_per_step = config.batch_size * config.grad_accum_steps;

  RunInfo info;
  info.device = device.device.str();
  info.device_reason = device.reason;
  info.model = config.model;
  info.parameters = models::parameter_count(*model.module);
  info.dataset = config.dataset;
  info.samples = dataset.inputs.size(0);
  info.precision = policy.name();
  info.precision_source = precision_source;
  info.precision_explanation = policy.explanation();
  info.opt_level = config.amp_opt_level == config::OptLevel::O0 ? "O0" : "O1";
  info.loss_scaling = policy.loss_scaling;
  info.init_scale = config.grad_scaler_init;
  info.growth_factor = config.grad_scaler_growth_factor;
  info.backoff_factor = config.grad_scaler_backoff;
  info.growth_interval = config.grad_scaler_growth_interval;
  info.optimizer = optimizer->describe();
  info.batch_size = config.batch_size;
  info.grad_accum_steps = config.grad_accum_steps;
  info.total_steps = total_steps;
  info.steps_per_epoch = steps_per_epoch;
  info.peak_lr = schedule.peak_lr;
  info.min_lr = schedule.min_lr;
  info.warmup_steps = config.warmup_steps;
  info.max_grad_norm = config.max_grad_norm;
  observer.on_start(info);

  RunSummary summary;
  summary.precision = policy.name();
  summary.loss_scaling = policy.loss_scaling;
  summary.initial_scale = scaler.state().scale;

  // Counted on the device so that a skipped step costs no synchronisation.
  auto overflow_steps = torch::zeros({}, torch::dtype(torch::kFloat32).device(device.device));
  const auto start = Clock::now();
  auto last_log = start;
  int64_t last_log_step = 0;

  for (int64_t step = 0; step < total_steps; ++step) {
    const double lr = schedule.at(step);
    torch::Tensor step_loss;
    for (int64_t micro = 0; micro < config.grad_accum_steps; ++micro) {
      const auto batch = batches.next();
      torch::Tensor loss;
      {
        precision::AutocastGuard autocast(device.device.type(), policy.compute_dtype,
                                          policy.autocast);
        loss = torch::nn::functional::cross_entropy(model.forward(batch.inputs), batch.targets);
      }
      step_loss = micro == 0 ? loss.detach().clone() : step_loss.add_(loss.detach());
      scaler.scale(loss / static_cast<double>(config.grad_accum_steps)).backward();
    }

    const auto grads = defined_grads(parameters);
    const auto found_inf = scaler.unscale_(grads);
    const bool log_step = step == 0 || (step + 1) % config.log_every == 0 || step + 1 == total_steps;
    torch::Tensor grad_norm;
    if (config.max_grad_norm > 0.0) {
      grad_norm = clip_grad_norm_(grads, config.max_grad_norm);
    } else if (log_step) {
      grad_norm = total_grad_norm(grads);
    }
    optimizer->step(lr, found_inf);
    scaler.update(found_inf);
    overflow_steps.add_(found_inf);
    at::_foreach_zero_(grads);

    observer.on_progress(step + 1, total_steps, seconds_since(start));
    if (!log_step) continue;

    StepReport report;
    report.step = step + 1;
    report.total_steps = total_steps;
    report.epoch = batches.epoch();
    report.loss = step_loss.item<double>() / static_cast<double>(config.grad_accum_steps);
    report.lr = lr;
    report.grad_norm = grad_norm.item<double>();
    const auto now = Clock::now();
    report.samples_per_sec = static_cast<double>((step + 1 - last_log_step) * samples_per_step) /
                             std::max(1e-9, std::chrono::duration<double>(now - last_log).count());
    last_log = now;
    last_log_step = step + 1;
    const auto scaler_state = scaler.state();
    report.loss_scaling = policy.loss_scaling;
    report.scale = scaler_state.scale;
    report.growth_tracker = scaler_state.growth_tracker;
    report.overflows = static_cast<int64_t>(overflow_steps.item<double>());
    report.skipped_steps = report.overflows;
    observer.on_step(report);

    if (step == 0) summary.initial_loss = report.loss;
    summary.final_loss = report.loss;
    summary.skipped_steps = report.skipped_steps;
    summary.final_scale = report.scale;
  }

  summary.steps = total_steps;
  summary.seconds = seconds_since(start);
  summary.samples_per_sec =
      static_cast<double>(total_steps * samples_per_step) / std::max(1e-9, summary.seconds);
  summary.peak_memory_bytes = peak_memory_bytes(device.device, summary.peak_memory_kind);
  observer.on_end(summary);
  return summary;
}

}  // namespace ampt::train

// The line a logged step prints (and metrics.jsonl records): built from what the step returned,
// the loss scaler and the counters on the device, read here (a logged step's one host sync).
#pragma once

#include "ampt/distributed/data_parallel.h"
#include "ampt/log/events.h"
#include "ampt/precision/loss_scaler.h"
#include "ampt/train/step.h"

#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace ampt::train {

// What the step itself does not know.
struct StepFacts {
  int64_t step = 0;  // 1-based
  int64_t total_steps = 0;
  int64_t epoch = 0;
  double lr = 0.0;
  int64_t tokens_per_sample = 1;
  int64_t flops_per_sample = 0;
  double peak_flops = 0.0;  // the device's, 0 when unknown: no MFU
  bool hysteresis = false;  // the scaler follows deepspeed's rules
  const std::vector<std::string>* figure_names = nullptr;  // StepResult::figures' (objective.h)
};

// `throughput()`: samples per second since the previous logged step, asked once the step's
// values have been read, so that on a GPU the interval ends when its work has.
log::StepReport step_report(const StepResult& result, const StepFacts& facts,
                            const std::function<double()>& throughput,
                            const precision::LossScaler& scaler,
                            const torch::Tensor& overflow_steps,
                            distributed::DataParallel& dist, const c10::Device& device);

}  // namespace ampt::train

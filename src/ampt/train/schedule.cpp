#include "ampt/train/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace ampt::train {

double LrSchedule::at(int64_t step) const {
  if (step < warmup_steps) {
    return peak_lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  }
  const auto decay_steps = std::max<int64_t>(1, total_steps - 1 - warmup_steps);
  const double progress =
      std::min(1.0, static_cast<double>(step - warmup_steps) / static_cast<double>(decay_steps));
  return min_lr + 0.5 * (1.0 + std::cos(std::numbers::pi * progress)) * (peak_lr - min_lr);
}

}  // namespace ampt::train

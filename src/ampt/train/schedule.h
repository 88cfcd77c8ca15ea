// Learning-rate schedule: linear warmup, then cosine decay to a floor.
#pragma once

#include <cstdint>

namespace ampt::train {

struct LrSchedule {
  double peak_lr = 0.0;
  double min_lr = 0.0;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;

  // Learning rate for optimizer step `step` (0-based): rises linearly to peak_lr over
  // warmup_steps, then follows half a cosine down to min_lr at the last step.
  double at(int64_t step) const;
};

}  // namespace ampt::train

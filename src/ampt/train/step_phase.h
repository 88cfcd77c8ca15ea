// A named range of the training step in --profile traces ("ampt::forward", ...); costs a flag
// check when no profiler is on.
#pragma once

#include <ATen/record_function.h>

namespace ampt::train {

class StepPhase {
 public:
  // `name` must be a literal: the profiler keeps the pointer.
  explicit StepPhase(const char* name) : record_(at::RecordScope::USER_SCOPE) {
    if (record_.isActive()) record_.before(name);
  }
  // Ends the range before the phase object goes out of scope.
  void end() { record_.end(); }

 private:
  at::RecordFunction record_;
};

}  // namespace ampt::train

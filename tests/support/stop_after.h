// A run context that asks a training run to stop, as SIGTERM would, once `steps` steps have run.
#pragma once

#include "ampt/train/trainer.h"

#include <csignal>

namespace ampt::test {

inline train::RunContext stop_after(int steps) {
  train::RunContext context;
  context.stop_requested = [calls = 0, steps]() mutable { return ++calls == steps ? SIGTERM : 0; };
  return context;
}

}  // namespace ampt::test

// The clock a run times itself with: steady, so a change of the wall clock moves no figure.
#pragma once

#include <chrono>

namespace ampt::train {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace ampt::train

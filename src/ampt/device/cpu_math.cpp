#include "ampt/device/cpu_math.h"

#include <ATen/ATen.h>

namespace ampt::device {

void initialize_cpu_math() {
  // ATen/cpu/vml.h's MKL-backed functions (torch 2.11), float, one element: too small for a
  // parallel region, so each first call is this thread's alone.
  const auto x = at::full({1}, 0.5f);
  for (const auto& f : {at::exp, at::log, at::log2, at::log10, at::tanh, at::erf, at::erfc,
                        at::erfinv, at::sqrt, at::sin, at::cos, at::tan, at::asin, at::acos,
                        at::atan, at::trunc}) {
    f(x);
  }
}

}  // namespace ampt::device

// Settles `auto` and requests the device cannot honour into the precision a run really uses.
#pragma once

#include "ampt/config/config.h"

#include <c10/core/Device.h>

#include <string>

namespace ampt::precision {

struct PrecisionChoice {
  config::MixedPrecision precision = config::MixedPrecision::no;  // never auto_select
  std::string reason;  // why, when it differs from a plain request; empty otherwise
  bool fell_back = false;  // the request could not be honoured (a warning for the user)
};

// auto: bf16 where the device computes it natively (GPUs of compute capability 8.0+, CPUs with
// avx512_bf16 or amx_bf16), else fp16 with the loss scaler on a GPU, else fp32 on a CPU.
// bf16 on a GPU without it becomes fp16, or a RuntimeError when `strict`. fp8 anywhere but a
// GPU of compute capability 8.9+ is a RuntimeError, strict or not.
PrecisionChoice choose_precision(config::MixedPrecision requested, bool strict,
                                 const c10::Device& device);

// Whether this CPU has native bf16 arithmetic (reads the flags in /proc/cpuinfo).
bool cpu_has_native_bf16();

}  // namespace ampt::precision

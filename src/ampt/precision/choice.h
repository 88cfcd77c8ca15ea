// Settles `auto` and requests the device cannot honour into the precision a run really uses.
#pragma once

#include "ampt/config/config.h"
#include "ampt/device/cpu_features.h"

#include <c10/core/Device.h>

#include <string>

namespace ampt::precision {

struct PrecisionChoice {
  config::MixedPrecision precision = config::MixedPrecision::no;  // never auto_select
  std::string reason;  // why, when it differs from a plain request; empty otherwise
  bool fell_back = false;  // the request could not be honoured (a warning for the user)
  // Honoured, but slower here than fp32: bf16 or fp16 on a CPU without instructions for it (a
  // warning for the user; empty otherwise).
  std::string warning;
};

// auto on a GPU of compute capability `capability` (major * 10 + minor): bf16 from 8.0
// (Ampere) on, else fp16 with the loss scaler. `ampt recommend` plans with the same rule.
PrecisionChoice auto_gpu_precision(int capability);

// auto: bf16 where the device computes it natively (GPUs of compute capability 8.0+, CPUs with
// avx512_bf16 or amx_bf16), else fp16 with the loss scaler on a GPU, else fp32 on a CPU.
// bf16 on a GPU without it becomes fp16, or a RuntimeError when `strict`. fp8 anywhere but a
// GPU of compute capability 8.9+ is a RuntimeError, strict or not. An explicit bf16 or fp16 on a
// CPU without native support for it is kept, with a warning. `cpu`: the CPU's features (this
// machine's unless a test gives others).
PrecisionChoice choose_precision(config::MixedPrecision requested, bool strict,
                                 const c10::Device& device,
                                 const device::CpuFeatures& cpu = device::cpu_features());

}  // namespace ampt::precision

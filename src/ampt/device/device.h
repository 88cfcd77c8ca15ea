// Chooses the device a run trains on.
#pragma once

#include "ampt/config/config.h"

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <string>

namespace ampt::device {

struct DeviceChoice {
  c10::Device device{c10::kCPU};
  std::string reason;
};

// auto: CUDA when a GPU is visible, else CPU. An explicit `cuda` without a GPU is an error.
DeviceChoice select_device(config::DeviceKind kind);

// The device's dense peak FLOP/s for matmuls in `dtype` (bf16/fp16 on tensor cores, fp32 without
// TF32), from the vendor's datasheet for the GPUs we know (H100, H200, A100); 0 for a CPU or an
// unknown GPU, and MFU is then not reported.
double peak_flops(const c10::Device& device, c10::ScalarType dtype);

// "cpu" or "cuda:0 (NVIDIA H100 80GB HBM3)".
std::string device_description(const c10::Device& device);

// Peak memory of the run so far: the CUDA caching allocator's peak on a GPU, the process's
// peak resident set on the CPU. `kind` receives which of the two it is.
int64_t peak_memory_bytes(const c10::Device& device, std::string& kind);

}  // namespace ampt::device

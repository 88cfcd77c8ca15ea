// Chooses the device a run trains on.
#pragma once

#include "ampt/config/config.h"

#include <c10/core/Device.h>

#include <string>

namespace ampt::train {

struct DeviceChoice {
  c10::Device device{c10::kCPU};
  std::string reason;
};

// auto: CUDA when a GPU is visible, else CPU. An explicit `cuda` without a GPU is an error.
DeviceChoice select_device(config::DeviceKind kind);

// Peak memory of the run so far: the CUDA caching allocator's peak on a GPU, the process's
// peak resident set on the CPU. `kind` receives which of the two it is.
int64_t peak_memory_bytes(const c10::Device& device, std::string& kind);

}  // namespace ampt::train

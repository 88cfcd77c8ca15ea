// Device-wide math and layout choices that trade nothing but speed: TF32 for fp32 matmuls and
// convolutions, channels-last (NHWC) for the CNN.
#pragma once

#include "ampt/config/config.h"
#include "ampt/models/registry.h"

#include <c10/core/Device.h>

#include <string>

namespace ampt::train {

// Sets whether cuBLAS and cuDNN may run fp32 matmuls and convolutions on TF32 tensor cores
// (process-wide). `allow` false means IEEE fp32 everywhere, stricter than PyTorch's own default
// (which lets cuDNN convolutions use TF32), so an fp32 run is a true fp32 baseline.
// Returns the line the startup block prints.
std::string apply_tf32(bool allow, const c10::Device& device);

// Whether the CNN runs channels-last: when enabled, on any device.
bool channels_last_applies(const config::Config& config);

// Stores the model's 4-D weights channels-last and converts its inputs the same way: the layout
// cuDNN's tensor-core convolutions work in, and oneDNN's fastest on a CPU (NCHW makes it reorder
// around every convolution). Call before the optimizer allocates its state.
void to_channels_last(models::Model& model);

}  // namespace ampt::train

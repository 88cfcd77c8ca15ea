// The KernelBackend of the CPU emulation of ampt's kernels (tests/support/cuda_emulation): its
// entry points on CPU tensors, the emulated device's (faked) compute capability, no stream. With
// a KernelSupport over it installed (KernelSupportOverride), the fused paths and their
// self-checks run the kernels' own code on the CPU.
#pragma once

#include "ampt/kernels/kernel_backend.h"

#include "cuda_emulated/launch.h"
#include "support/cuda_emulation/emulated_device.h"

#include <fmt/format.h>

namespace ampt::test {

inline kernels::KernelBackend emulated_backend() {
  namespace emulated = kernels::cuda_emulated;
  return {
      .device_type = c10::kCPU,
      .capability = [](const c10::Device&) { return emu::device_capability(); },
      .describe =
          [](const c10::Device& d) {
            return fmt::format("{} (emulated GPU, compute capability {}.{})", d.str(),
                               emu::device_capability() / 10, emu::device_capability() % 10);
          },
      .stream = [](const c10::Device&) -> void* { return nullptr; },
      .softmax_cross_entropy_image = emulated::softmax_cross_entropy_image,
      .add_layer_norm_image = emulated::add_layer_norm_image,
      .fp8_quantize_image = emulated::fp8_quantize_image,
      .adamw_image = emulated::adamw_image,
      .dequantize_image = emulated::dequantize_image,
      .softmax_cross_entropy = emulated::softmax_cross_entropy,
      .add_layer_norm_forward = emulated::add_layer_norm_forward,
      .add_layer_norm_grad_chunks = emulated::add_layer_norm_grad_chunks,
      .add_layer_norm_backward = emulated::add_layer_norm_backward,
      .fp8_column_partial_rows = emulated::fp8_column_partial_rows,
      .fp8_cast_transpose = emulated::fp8_cast_transpose,
      .fp8_scale_from_amax = emulated::fp8_scale_from_amax,
      .fp8_rowwise_amax = emulated::fp8_rowwise_amax,
      .fp8_rowwise_cast_transpose = emulated::fp8_rowwise_cast_transpose,
      .adamw = emulated::adamw,
      .dequantize_nf4 = emulated::dequantize_nf4,
      .dequantize_rows = emulated::dequantize_rows,
  };
}

}  // namespace ampt::test

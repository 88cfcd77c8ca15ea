#include "ampt/kernels/kernel_backend.h"

#include "ampt/kernels/cuda/launch.h"

#include <ATen/cuda/CUDAContext.h>
#include <fmt/format.h>

namespace ampt::kernels {
namespace {

int gpu_capability(const c10::Device& device) {
  const auto* properties = at::cuda::getDeviceProperties(device.index());
  return properties->major * 10 + properties->minor;
}

std::string describe_gpu(const c10::Device& device) {
  const auto* properties = at::cuda::getDeviceProperties(device.index());
  return fmt::format("{} ({}, compute capability {}.{})", device.str(), properties->name,
                     properties->major, properties->minor);
}

void* current_stream(const c10::Device& device) {
  return at::cuda::getCurrentCUDAStream(device.index()).stream();
}

}  // namespace

const KernelBackend& cuda_backend() {
  static const KernelBackend backend{
      .device_type = c10::kCUDA,
      .capability = gpu_capability,
      .describe = describe_gpu,
      .stream = current_stream,
      .softmax_cross_entropy_image = cuda::softmax_cross_entropy_image,
      .add_layer_norm_image = cuda::add_layer_norm_image,
      .fp8_quantize_image = cuda::fp8_quantize_image,
      .adamw_image = cuda::adamw_image,
      .dequantize_image = cuda::dequantize_image,
      .softmax_cross_entropy = cuda::softmax_cross_entropy,
      .add_layer_norm_forward = cuda::add_layer_norm_forward,
      .add_layer_norm_grad_chunks = cuda::add_layer_norm_grad_chunks,
      .add_layer_norm_backward = cuda::add_layer_norm_backward,
      .fp8_column_partial_rows = cuda::fp8_column_partial_rows,
      .fp8_cast_transpose = cuda::fp8_cast_transpose,
      .fp8_scale_from_amax = cuda::fp8_scale_from_amax,
      .fp8_rowwise_amax = cuda::fp8_rowwise_amax,
      .fp8_rowwise_cast_transpose = cuda::fp8_rowwise_cast_transpose,
      .adamw = cuda::adamw,
      .dequantize_nf4 = cuda::dequantize_nf4,
      .dequantize_rows = cuda::dequantize_rows,
  };
  return backend;
}

}  // namespace ampt::kernels

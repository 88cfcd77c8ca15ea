// Where ampt's own CUDA kernels (cuda/launch.h) run, as the table the fused paths launch through:
// a GPU, with the kernels nvcc built, on the current CUDA stream; or, in the tests, the CPU, with
// the same kernel code emulated (tests/support/cuda_emulation) over CPU tensors. The fused paths
// and their self-checks (self_check.h) run one code over either, so a self-check that is itself
// wrong fails in CI under the emulation, not on the first GPU.
#pragma once

#include "ampt/kernels/kernel_abi.h"

#include <c10/core/Device.h>

#include <cstdint>
#include <string>

namespace ampt::kernels {

struct KernelBackend {
  c10::DeviceType device_type = c10::kCUDA;  // the tensors the kernels take: kCUDA, or kCPU
  // The device's compute capability (major * 10 + minor), how messages name the device, and the
  // stream a kernel launches on there (null for the emulation).
  int (*capability)(const c10::Device&) = nullptr;
  std::string (*describe)(const c10::Device&) = nullptr;
  void* (*stream)(const c10::Device&) = nullptr;

  // cuda/launch.h's entry points, documented there.
  abi::KernelImage (*softmax_cross_entropy_image)() = nullptr;
  abi::KernelImage (*add_layer_norm_image)() = nullptr;
  abi::KernelImage (*fp8_quantize_image)() = nullptr;
  abi::KernelImage (*adamw_image)() = nullptr;
  abi::KernelImage (*dequantize_image)() = nullptr;
  void (*softmax_cross_entropy)(void* logits, abi::Dtype dtype, int64_t rows, int64_t cols,
                                int64_t valid, const int64_t* targets, int64_t ignore_index,
                                float* row_loss, bool write_grad, void* stream) = nullptr;
  void (*add_layer_norm_forward)(abi::AddLayerNormLayout layout, const void* residual,
                                 const void* branch, const float* weight, const float* bias,
                                 int64_t rows, int64_t cols, float eps, void* sum, void* normed,
                                 float* mean, float* rstd, void* stream) = nullptr;
  int64_t (*add_layer_norm_grad_chunks)(int64_t rows) = nullptr;
  void (*add_layer_norm_backward)(abi::AddLayerNormLayout layout, const void* sum,
                                  const void* d_normed, const void* d_sum, const float* weight,
                                  const float* mean, const float* rstd, int64_t rows, int64_t cols,
                                  void* d_residual, void* d_branch, float* partial,
                                  void* stream) = nullptr;
  int64_t (*fp8_column_partial_rows)(int64_t rows) = nullptr;
  void (*fp8_cast_transpose)(const abi::Fp8Input& x, int64_t rows, int64_t cols,
                             const float* scale, abi::Fp8Dtype out_dtype, void* out, void* out_t,
                             float* inverse, float* column_partials,
                             const abi::Fp8ScaleUpdate* update, void* stream) = nullptr;
  void (*fp8_scale_from_amax)(const abi::Fp8Input& x, int64_t n, float max_over_headroom,
                              float* scale, float* amax_out, uint32_t* scratch,
                              void* stream) = nullptr;
  void (*fp8_rowwise_amax)(const void* x, abi::Dtype dtype, int64_t rows, int64_t cols,
                           uint32_t* row_amax, uint32_t* col_amax, void* stream) = nullptr;
  void (*fp8_rowwise_cast_transpose)(const void* x, abi::Dtype dtype, int64_t rows, int64_t cols,
                                     const uint32_t* row_amax, const uint32_t* col_amax,
                                     float max_over_headroom, abi::Fp8Dtype out_dtype, void* out,
                                     void* out_t, float* row_inverse, float* col_inverse,
                                     void* stream) = nullptr;
  void (*adamw)(const abi::AdamWTensors& tensors, const abi::AdamWHyper& hyper,
                void* stream) = nullptr;
  void (*dequantize_nf4)(const abi::Nf4Input& weight, abi::Dtype dtype, void* out,
                         void* stream) = nullptr;
  void (*dequantize_rows)(const void* values, abi::RowCode code, const float* scales,
                          int64_t rows, int64_t cols, abi::Dtype dtype, void* out,
                          void* stream) = nullptr;
};

// The GPU's: cuda/launch.h's kernels, on the current CUDA stream.
const KernelBackend& cuda_backend();

}  // namespace ampt::kernels

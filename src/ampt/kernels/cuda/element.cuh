// What every kernel file here shares: float conversions of the three element types the kernels
// read and write, the image a device runs, and the check after a launch.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "ampt/kernels/cuda/launch.h"

#include <stdexcept>
#include <string>

namespace ampt::kernels::cuda {

__device__ inline float to_float(float v) { return v; }
__device__ inline float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ inline float to_float(__half v) { return __half2float(v); }
template <class T> __device__ T from_float(float v);
template <> __device__ inline float from_float<float>(float v) { return v; }
template <> __device__ inline __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16(v);
}
template <> __device__ inline __half from_float<__half>(float v) { return __float2half(v); }

// The image of `kernel` (one of a file's kernels: all of a file's share its images) on the
// current device; a device below `needs` is not asked.
template <class Kernel>
KernelImage image_of(Kernel* kernel, int needs) {
  KernelImage image;
  image.needs = needs;
  int device = 0, major = 0, minor = 0;
  cudaError_t status = cudaGetDevice(&device);
  if (status == cudaSuccess) {
    status = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  }
  if (status == cudaSuccess) {
    status = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  }
  if (status == cudaSuccess) {
    image.capability = major * 10 + minor;
    if (image.capability < needs) return image;
    cudaFuncAttributes attributes{};
    status = cudaFuncGetAttributes(&attributes, kernel);
    if (status == cudaSuccess) {
      image.binary_version = attributes.binaryVersion;
      image.ptx_version = attributes.ptxVersion;
      return image;
    }
  }
  cudaGetLastError();  // not sticky: the next launch must not report it
  image.error = cudaGetErrorString(status);
  return image;
}

// Throws with `what` and CUDA's message when the last launch failed.
inline void check_launch(const char* what) {
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) {
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
  }
}

}  // namespace ampt::kernels::cuda

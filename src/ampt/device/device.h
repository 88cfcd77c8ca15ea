// Chooses the device a run trains on.
#pragma once

#include "ampt/config/config.h"

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <optional>
#include <string>

namespace ampt::device {

struct DeviceChoice {
  c10::Device device{c10::kCPU};
  std::string reason;
  std::string warning;  // auto passed over a GPU it cannot use: why (empty otherwise)
};

// auto: CUDA when a GPU is visible that LibTorch can compute on, else CPU (with a warning when a
// GPU was passed over). An explicit `cuda` without a usable GPU is an error saying why.
DeviceChoice select_device(config::DeviceKind kind);

// The oldest compute capability the torch 2.11 wheel for CUDA 13 runs: 7.5 (Turing). Older GPUs
// (Volta's 7.0, Pascal's 6.x) have no kernels in it.
inline constexpr int kOldestTorchCapability = 75;

// Why LibTorch cannot compute on the GPU `index` (nullopt when it can): its capability is below
// kOldestTorchCapability, or a first small operation on it fails.
std::optional<std::string> gpu_problem(int index);

// That problem's text for a GPU named `name` of compute capability major.minor.
std::string unsupported_gpu(int index, const std::string& name, int major, int minor);

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

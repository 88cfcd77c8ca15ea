#include "ampt/device/device.h"

#include "ampt/core/errors.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <sys/resource.h>
#include <torch/cuda.h>

#include <fstream>
#include <string>

namespace ampt::device {

DeviceChoice select_device(config::DeviceKind kind) {
  const auto gpus = torch::cuda::is_available() ? torch::cuda::device_count() : 0;
  switch (kind) {
    case config::DeviceKind::cpu:
      return {c10::Device(c10::kCPU), "requested"};
    case config::DeviceKind::cuda:
      if (gpus == 0) {
        throw RuntimeError(
            "device 'cuda' requested but no CUDA device is available; use --device cpu or auto");
      }
      return {c10::Device(c10::kCUDA, 0), "requested"};
    case config::DeviceKind::auto_select:
      break;
  }
  if (gpus > 0) {
    return {c10::Device(c10::kCUDA, 0), "auto: " + std::to_string(gpus) + " CUDA device(s) found"};
  }
  return {c10::Device(c10::kCPU), "auto: no CUDA device found"};
}

namespace {

std::string gpu_name(const c10::Device& device) {
  return at::cuda::getDeviceProperties(device.index())->name;
}

}  // namespace

double peak_flops(const c10::Device& device, c10::ScalarType dtype) {
  if (!device.is_cuda()) return 0.0;
  struct Peak {
    const char* name_part;
    double half;  // bf16 / fp16 dense tensor-core FLOP/s
    double fp32;  // fp32 without TF32
  };
  // SXM figures; an H200 has the H100's compute.
  constexpr Peak kPeaks[] = {{"H100", 989e12, 67e12}, {"H200", 989e12, 67e12}, {"A100", 312e12, 19.5e12}};
  const auto name = gpu_name(device);
  for (const auto& peak : kPeaks) {
    if (name.find(peak.name_part) != std::string::npos) {
      return dtype == c10::kFloat ? peak.fp32 : peak.half;
    }
  }
  return 0.0;
}

std::string device_description(const c10::Device& device) {
  return device.is_cuda() ? device.str() + " (" + gpu_name(device) + ")" : device.str();
}

int64_t peak_memory_bytes(const c10::Device& device, std::string& kind) {
  if (device.is_cuda()) {
    kind = "CUDA allocator peak";
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
    return stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)]
        .peak;
  }
  kind = "process peak RSS";
  // VmHWM is this process image's own peak. getrusage's ru_maxrss survives execve, so a run
  // started by a larger process (ampt compare, a test runner) would report its parent's peak.
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.starts_with("VmHWM:")) return std::stoll(line.substr(6)) * 1024;  // in kB
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;  // Linux reports kilobytes
}

}  // namespace ampt::device

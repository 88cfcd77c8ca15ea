#include "ampt/train/device.h"

#include "ampt/core/errors.h"

#include <c10/cuda/CUDACachingAllocator.h>
#include <sys/resource.h>
#include <torch/cuda.h>

namespace ampt::train {

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

int64_t peak_memory_bytes(const c10::Device& device, std::string& kind) {
  if (device.is_cuda()) {
    kind = "CUDA allocator peak";
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
    return stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)]
        .peak;
  }
  kind = "process peak RSS";
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;  // Linux reports kilobytes
}

}  // namespace ampt::train

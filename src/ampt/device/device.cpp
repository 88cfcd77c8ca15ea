#include "ampt/device/device.h"

#include "ampt/core/errors.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <fmt/format.h>
#include <sys/resource.h>
#include <torch/cuda.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <fstream>
#include <string>

namespace ampt::device {

DeviceChoice select_device(config::DeviceKind kind) {
  const auto gpus = torch::cuda::is_available() ? torch::cuda::device_count() : 0;
  switch (kind) {
    case config::DeviceKind::cpu:
      return {c10::Device(c10::kCPU), "requested", ""};
    case config::DeviceKind::cuda:
      if (gpus == 0) {
        throw RuntimeError(
            "device 'cuda' requested but no CUDA device is available; use --device cpu or auto");
      }
      if (const auto problem = gpu_problem(0)) {
        throw RuntimeError(fmt::format("device 'cuda' requested but {}: use --device cpu", *problem));
      }
      return {c10::Device(c10::kCUDA, 0), "requested", ""};
    case config::DeviceKind::auto_select:
      break;
  }
  if (gpus == 0) return {c10::Device(c10::kCPU), "auto: no CUDA device found", ""};
  if (const auto problem = gpu_problem(0)) {
    return {c10::Device(c10::kCPU), "auto: the GPU cannot run LibTorch",
            fmt::format("training on the CPU: {}", *problem)};
  }
  return {c10::Device(c10::kCUDA, 0),
          "auto: " + std::to_string(gpus) + " CUDA device(s) found", ""};
}

std::string unsupported_gpu(int index, const std::string& name, int major, int minor) {
  return fmt::format("cuda:{} ({}) has compute capability {}.{}, and this LibTorch ({}) runs "
                     "GPUs of compute capability {}.{} (Turing) and newer",
                     index, name, major, minor, TORCH_VERSION, kOldestTorchCapability / 10,
                     kOldestTorchCapability % 10);
}

std::optional<std::string> gpu_problem(int index) {
  const auto* properties = at::cuda::getDeviceProperties(index);
  if (properties->major * 10 + properties->minor < kOldestTorchCapability) {
    return unsupported_gpu(index, properties->name, properties->major, properties->minor);
  }
  try {
    const auto one = torch::ones({1}, torch::device(c10::Device(c10::kCUDA, index))).add_(1);
    if (one.item<float>() == 2.0f) return std::nullopt;
    return fmt::format("cuda:{} ({}) computed 1 + 1 = {}", index, properties->name,
                       one.item<float>());
  } catch (const c10::Error& error) {
    return fmt::format("cuda:{} ({}) cannot run LibTorch's kernels: {}", index, properties->name,
                       message_of(error));
  }
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

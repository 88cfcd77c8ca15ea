#include "ampt/commands/doctor.h"

#include "ampt/config/command_flags.h"
#include "ampt/core/allocator.h"
#include "ampt/core/version.h"
#include "ampt/device/cpu_features.h"
#include "ampt/device/device.h"
#include "ampt/distributed/process_group.h"
#include "ampt/kernels/kernel_support.h"
#include "ampt/precision/choice.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/cuda.h>
#include <torch/version.h>

#include <optional>
#include <span>

namespace ampt::commands {
namespace {

// doctor has no flags; its empty table still gives it the commands' one parser and errors.
struct DoctorSettings {};

const config::FlagTable<DoctorSettings>& doctor_flags() {
  static const config::FlagTable<DoctorSettings> table;
  return table;
}

std::string cuda_version(int version) {
  return fmt::format("{}.{}", version / 1000, version % 1000 / 10);
}

std::string architectures(std::span<const int> binaries) {
  std::vector<std::string> names;
  for (const int arch : binaries) names.push_back(fmt::format("sm_{}", arch));
  return fmt::format("{}", fmt::join(names, ", "));
}

const char* precision_name(config::MixedPrecision precision) {
  const char* names[] = {"fp32", "fp16", "bf16", "auto", "fp8"};
  return names[static_cast<int>(precision)];
}

std::string precision_text(const precision::PrecisionChoice& choice) {
  return fmt::format("{} ({})", precision_name(choice.precision), choice.reason);
}

// cuDNN's version number: 91900 is 9.19.0.
std::string cudnn_version(long version) {
  return fmt::format("{}.{}.{}", version / 10000, version % 10000 / 100, version % 100);
}

void print_versions() {
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  const auto& hooks = at::detail::getCUDAHooks();
  fmt::print("ampt {} (git {}), LibTorch {}, CUDA runtime {}, {}, NCCL {}, cuDNN {}\n", kVersion,
             kGitRevision, TORCH_VERSION, cuda_version(runtime),
             driver > 0 ? "driver for CUDA " + cuda_version(driver) : std::string("no CUDA driver"),
             distributed::nccl_version(),
             at::globalContext().hasCuDNN() ? cudnn_version(hooks.versionCuDNN()) : "none");
  fmt::print("allocators: malloc {}, CUDA {}\n", malloc_in_use(),
             c10::cuda::CUDACachingAllocator::name());
  fmt::print("kernels built for: {} binaries and compute_{} PTX; the fp8 kernels for {}\n",
             architectures(kCudaBinaries), kCudaPtx, architectures(kCudaFp8Binaries));
}

// Which --base_dtype keep a LoRA run's speed where bf16 and fp16 are or are not native: the others
// are dequantized into the compute dtype before each GEMM, by `dequantizer` (ATen ops, or on a GPU
// ampt's dequantize kernels where they run).
std::string base_dtypes_text(bool native_bf16, bool native_fp16, std::string_view dequantizer) {
  std::vector<std::string> fast{"auto"}, slow{"nf4", "int8", "fp8"};
  (native_bf16 ? fast : slow).emplace_back("bf16");
  (native_fp16 ? fast : slow).emplace_back("fp16");
  return fmt::format("base_dtype (a LoRA base's storage): {} at full speed; {} in less memory, "
                     "each weight dequantized by {} before its GEMM, slower",
                     fmt::join(fast, ", "), fmt::join(slow, ", "), dequantizer);
}

void print_cpu() {
  const auto& cpu = device::cpu_features();
  fmt::print("\nCPU: {}, {} threads for ATen\n", cpu.model.empty() ? "unknown model" : cpu.model,
             at::get_num_threads());
  const auto flags = cpu.flags();
  fmt::print("  instructions: {}\n", flags.empty() ? "none of avx2, avx512f, avx512_bf16, "
                                                     "amx_bf16, avx512_fp16, amx_fp16, f16c"
                                                   : fmt::format("{}", fmt::join(flags, ", ")));
  fmt::print("  bf16: {}\n", cpu.native_bf16() ? "native"
                                               : "emulated (no avx512_bf16 or amx_bf16): slower "
                                                 "than fp32 here");
  fmt::print("  fp16: {}\n", cpu.native_fp16() ? "native"
                                               : "emulated (no avx512_fp16 or amx_fp16): slower "
                                                 "than fp32 here");
  fmt::print("  mixed_precision auto: {}\n",
             precision_text(precision::choose_precision(config::MixedPrecision::auto_select, false,
                                                        c10::Device(c10::kCPU))));
  fmt::print("  {}\n", base_dtypes_text(cpu.native_bf16(), cpu.native_fp16(), "ATen ops"));
}

// The fp8 scaling modes (--fp8_scaling) that run on `device`.
std::string fp8_modes(const c10::Device& device) {
  using kernels::FusedPath;
  auto& support = kernels::kernel_support();
  const auto tensorwise = support.status(FusedPath::fp8_gemm, device);
  const auto rowwise = support.status(FusedPath::fp8_rowwise_gemm, device);
  const auto mode = [](const kernels::PathStatus& s) {
    return s.runs ? std::string("run") : "do not run (" + s.reason + ")";
  };
  return fmt::format("delayed and current scaling {}; rowwise {}", mode(tensorwise),
                     rowwise.runs ? "runs" : "does not (" + rowwise.reason + ")");
}

// Returns whether LibTorch computes on it.
bool print_gpu(int index) {
  const c10::Device device(c10::kCUDA, static_cast<c10::DeviceIndex>(index));
  const auto* properties = at::cuda::getDeviceProperties(index);
  fmt::print("\nGPU cuda:{}: {}, compute capability {}.{}, {:.1f} GiB\n", index, properties->name,
             properties->major, properties->minor,
             static_cast<double>(properties->totalGlobalMem) / (1 << 30));
  if (const auto problem = device::gpu_problem(index)) {
    fmt::print("  LibTorch: cannot run: {}\n", *problem);
    return false;
  }
  fmt::print("  LibTorch: runs\n");
  fmt::print("  mixed_precision auto: {}\n",
             precision_text(precision::choose_precision(config::MixedPrecision::auto_select, false,
                                                        device)));
  for (const auto path : kernels::kFusedPaths) {
    const auto status = kernels::kernel_support().status(path, device);
    if (status.runs) {
      fmt::print("  {}: runs ({}); self-check: {}\n", kernels::path_name(path), status.image,
                 status.check);
    } else {
      fmt::print("  {}: ATen instead: {}\n", kernels::path_name(path), status.reason);
    }
  }
  fmt::print("  fp8 (--mixed_precision fp8): {}\n", fp8_modes(device));
  const auto dequantize = kernels::kernel_support().status(kernels::FusedPath::dequantize, device);
  fmt::print("  {}\n", base_dtypes_text(properties->major >= 8, true,
                                        dequantize.runs ? "ampt's dequantize kernels"
                                                        : "ATen ops (" + dequantize.reason + ")"));
  return true;
}

}  // namespace

std::string doctor_help() {
  return config::command_help(
      "doctor",
      "Usage: ampt doctor\n\n"
      "What this machine can train with, and why: versions, the CPU's bf16 and fp16 instructions,\n"
      "each GPU's compute capability and the fused kernels, GEMM epilogues and fp8 modes that run\n"
      "on it (each self-checked against ATen), and the precision `--mixed_precision auto` picks.\n"
      "Exit 0 when `ampt train` can run here, 1 when a visible GPU cannot run LibTorch.",
      {}, nullptr);
}

int run_doctor(const std::vector<std::string>& args, const Environment&) {
  config::parse_command_flags("doctor", doctor_flags(), args);
  print_versions();
  print_cpu();
  const int gpus = torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0;
  if (gpus == 0) fmt::print("\nGPU: none visible\n");
  bool every_gpu_runs = true;
  for (int index = 0; index < gpus; ++index) every_gpu_runs = print_gpu(index) && every_gpu_runs;
  for (const auto& warning : kernels::kernel_support().take_warnings()) {
    fmt::print("\nwarning: {}\n", warning);
  }
  const auto choice = device::select_device(config::DeviceKind::auto_select);
  const auto precision = precision::choose_precision(config::MixedPrecision::auto_select, false,
                                                     choice.device);
  if (!every_gpu_runs) {
    fmt::print("\ncan train: on the CPU only; a visible GPU cannot run LibTorch (above)\n");
    return kRuntimeError;
  }
  fmt::print("\ncan train: yes; by default `ampt train` runs on {} in {}\n",
             device::device_description(choice.device), precision_name(precision.precision));
  return 0;
}

}  // namespace ampt::commands

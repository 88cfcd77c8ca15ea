#include "ampt/precision/choice.h"

#include "ampt/core/errors.h"

#include <ATen/cuda/CUDAContext.h>
#include <fmt/format.h>

namespace ampt::precision {

using config::MixedPrecision;

namespace {

std::string cpu_name(const device::CpuFeatures& cpu) {
  return cpu.model.empty() ? "this CPU" : "this CPU (" + cpu.model + ")";
}

// bf16 or fp16 asked for on a CPU that converts every value to fp32 and back for it.
std::string emulated_on_cpu(MixedPrecision requested, const device::CpuFeatures& cpu) {
  const bool bf16 = requested == MixedPrecision::bf16;
  if (bf16 ? cpu.native_bf16() : cpu.native_fp16()) return "";
  return fmt::format("{} has no native {} ({}): ATen converts every {} value to fp32 and back, so "
                     "this run is several times slower than fp32 here (--mixed_precision auto "
                     "picks fp32 on it)",
                     cpu_name(cpu), bf16 ? "bf16" : "fp16",
                     bf16 ? "avx512_bf16 or amx_bf16" : "avx512_fp16 or amx_fp16",
                     bf16 ? "bf16" : "fp16");
}

}  // namespace

PrecisionChoice auto_gpu_precision(int capability) {
  const auto text = fmt::format("compute capability {}.{}", capability / 10, capability % 10);
  if (capability >= 80) {
    return {MixedPrecision::bf16, "auto: the GPU (" + text + ") has bf16", false, ""};
  }
  return {MixedPrecision::fp16, "auto: the GPU (" + text + ") has no bf16, so fp16 with the loss scaler",
          false, ""};
}

PrecisionChoice choose_precision(MixedPrecision requested, bool strict, const c10::Device& device,
                                 const device::CpuFeatures& cpu) {
  // fp8 has no fallback: a run asked for it to measure fp8, another precision would mislead.
  if (requested == MixedPrecision::fp8 && !device.is_cuda()) {
    throw RuntimeError("mixed_precision fp8 needs a CUDA GPU of compute capability 8.9 or newer "
                       "(Ada, Hopper); this run is on " + device.str() + ": use bf16 on a CPU");
  }
  if (!device.is_cuda()) {
    if (requested == MixedPrecision::bf16 || requested == MixedPrecision::fp16) {
      return {requested, "", false, emulated_on_cpu(requested, cpu)};
    }
    if (requested != MixedPrecision::auto_select) return {requested, "", false, ""};
    if (cpu.native_bf16()) {
      return {MixedPrecision::bf16,
              "auto: " + cpu_name(cpu) + " has native bf16 (avx512_bf16 or amx_bf16)", false, ""};
    }
    return {MixedPrecision::no,
            "auto: " + cpu_name(cpu) +
                " has no native bf16 (avx512_bf16 or amx_bf16), where bf16 runs slower than fp32, "
                "so fp32",
            false, ""};
  }
  const auto* properties = at::cuda::getDeviceProperties(device.index());
  const int capability = properties->major * 10 + properties->minor;
  const auto capability_text =
      fmt::format("compute capability {}.{}", properties->major, properties->minor);
  if (requested == MixedPrecision::fp8) {
    if (capability >= 89) return {requested, "", false, ""};
    throw RuntimeError("mixed_precision fp8 needs a GPU of compute capability 8.9 or newer (Ada, "
                       "Hopper), this one has " + capability_text + ": use bf16");
  }
  if (requested == MixedPrecision::auto_select) return auto_gpu_precision(capability);
  if (requested != MixedPrecision::bf16 || capability >= 80) return {requested, "", false, ""};
  if (strict) {
    throw RuntimeError("mixed_precision bf16 needs a GPU of compute capability 8.0 or newer, this one "
                       "has " + capability_text + ": use fp16, or drop --strict_precision to fall back");
  }
  return {MixedPrecision::fp16,
          "bf16 is not supported by this GPU (" + capability_text +
              "): falling back to fp16 with the loss scaler",
          true, ""};
}

}  // namespace ampt::precision

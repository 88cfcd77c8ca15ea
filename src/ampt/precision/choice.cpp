#include "ampt/precision/choice.h"

#include "ampt/core/errors.h"

#include <ATen/cuda/CUDAContext.h>
#include <fmt/format.h>

#include <fstream>
#include <sstream>

namespace ampt::precision {

using config::MixedPrecision;

bool cpu_has_native_bf16() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (!line.starts_with("flags")) continue;
    std::istringstream flags(line.substr(line.find(':') + 1));
    for (std::string flag; flags >> flag;) {
      if (flag == "avx512_bf16" || flag == "amx_bf16") return true;
    }
    return false;  // every core lists the same flags
  }
  return false;
}

PrecisionChoice choose_precision(MixedPrecision requested, bool strict, const c10::Device& device) {
  // fp8 has no fallback: a run asked for it to measure fp8, another precision would mislead.
  if (requested == MixedPrecision::fp8 && !device.is_cuda()) {
    throw RuntimeError("mixed_precision fp8 needs a CUDA GPU of compute capability 8.9 or newer "
                       "(Ada, Hopper); this run is on " + device.str() + ": use bf16 on a CPU");
  }
  if (!device.is_cuda()) {
    if (requested != MixedPrecision::auto_select) return {requested, "", false};
    // Without native bf16 a CPU emulates it, slower than fp32; fp16 is emulated everywhere.
    if (cpu_has_native_bf16()) {
      return {MixedPrecision::bf16, "auto: this CPU has native bf16 (avx512_bf16 or amx_bf16)",
              false};
    }
    return {MixedPrecision::no, "auto: this CPU has no native bf16 (avx512_bf16 or amx_bf16), so fp32",
            false};
  }
  const auto* properties = at::cuda::getDeviceProperties(device.index());
  const auto capability =
      fmt::format("compute capability {}.{}", properties->major, properties->minor);
  const bool has_bf16 = properties->major >= 8;  // Ampere and newer
  if (requested == MixedPrecision::fp8) {
    if (properties->major * 10 + properties->minor >= 89) return {requested, "", false};
    throw RuntimeError("mixed_precision fp8 needs a GPU of compute capability 8.9 or newer (Ada, "
                       "Hopper), this one has " + capability + ": use bf16");
  }
  if (requested == MixedPrecision::auto_select) {
    if (has_bf16) return {MixedPrecision::bf16, "auto: the GPU (" + capability + ") has bf16", false};
    return {MixedPrecision::fp16,
            "auto: the GPU (" + capability + ") has no bf16, so fp16 with the loss scaler", false};
  }
  if (requested != MixedPrecision::bf16 || has_bf16) return {requested, "", false};
  if (strict) {
    throw RuntimeError("mixed_precision bf16 needs a GPU of compute capability 8.0 or newer, this one "
                       "has " + capability + ": use fp16, or drop --strict_precision to fall back");
  }
  return {MixedPrecision::fp16,
          "bf16 is not supported by this GPU (" + capability +
              "): falling back to fp16 with the loss scaler",
          true};
}

}  // namespace ampt::precision

#include "ampt/kernels/kernel_support.h"

#include "ampt/kernels/self_check.h"

#include "ampt/core/errors.h"

#include <ATen/core/grad_mode.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <exception>
#include <utility>

namespace ampt::kernels {
namespace {

std::string capability_text(int capability) {
  return fmt::format("{}.{}", capability / 10, capability % 10);
}

// The paths being self-checked on this thread: each runs while its own check runs.
std::vector<std::pair<c10::DeviceIndex, FusedPath>>& checking() {
  thread_local std::vector<std::pair<c10::DeviceIndex, FusedPath>> paths;
  return paths;
}

// A path of our own kernels: the image `image()` finds on the device.
PathProbe kernel_probe(abi::KernelImage (*image)(), std::string_view feature,
                       std::string (*self_check)(const c10::Device&)) {
  return {[image, feature](const c10::Device& device) {
            const c10::DeviceGuard guard(device);
            return image_status(image(), feature);
          },
          self_check};
}

// A path of a library's (cuBLASLt, torch): it runs from `needs` on, as `what`.
PathProbe library_probe(int needs, std::string_view feature, std::string what,
                        std::string (*self_check)(const c10::Device&)) {
  return {[needs, feature, what](const c10::Device& device) {
            abi::KernelImage image;
            image.capability = cuda_backend().capability(device);
            image.needs = needs;
            if (image.capability < needs) return image_status(image, feature);
            return PathStatus{true, what, "", ""};
          },
          self_check};
}

KernelSupport*& override_support() {
  static KernelSupport* support = nullptr;
  return support;
}

}  // namespace

std::string_view path_name(FusedPath path) {
  switch (path) {
    case FusedPath::softmax_cross_entropy: return "softmax+loss kernel";
    case FusedPath::add_layer_norm: return "add+LayerNorm kernel";
    case FusedPath::fp8_casts: return "fp8 cast kernels";
    case FusedPath::gemm_epilogues: return "GEMM epilogues";
    case FusedPath::fp8_gemm: return "fp8 GEMM (per-tensor scales)";
    case FusedPath::fp8_rowwise_gemm: return "fp8 GEMM (row-wise scales)";
    case FusedPath::adamw: return "AdamW kernel";
    case FusedPath::dequantize: return "dequantize kernels";
  }
  return "?";
}

PathStatus image_status(const abi::KernelImage& image, std::string_view feature) {
  PathStatus status;
  if (image.capability > 0 && image.capability < image.needs) {
    status.reason = fmt::format("{} needs compute capability {} or newer, this GPU has {}",
                                feature, capability_text(image.needs),
                                capability_text(image.capability));
    return status;
  }
  if (image.binary_version == 0) {
    status.reason =
        image.capability > 0
            ? fmt::format("this build has no image for compute capability {} ({})",
                          capability_text(image.capability),
                          image.error != nullptr ? image.error : "none found")
            : fmt::format("the device did not answer ({})",
                          image.error != nullptr ? image.error : "unknown error");
    return status;
  }
  status.runs = true;
  status.image = image.ptx_version != 0 && image.ptx_version / 10 != image.binary_version / 10
                     ? fmt::format("compute_{} PTX compiled for {}", image.ptx_version,
                                   capability_text(image.binary_version))
                     : fmt::format("sm_{} binary", image.binary_version);
  return status;
}

KernelSupport::KernelSupport(std::map<FusedPath, PathProbe> probes,
                             std::function<std::string(const c10::Device&)> describe)
    : probes_(std::move(probes)), describe_(std::move(describe)), backend_(&cuda_backend()) {}

KernelSupport::KernelSupport(std::map<FusedPath, PathProbe> probes, const KernelBackend& backend)
    : probes_(std::move(probes)), describe_(backend.describe), backend_(&backend) {}

PathStatus KernelSupport::status(FusedPath path, const c10::Device& device) {
  const std::pair key{device.index(), path};
  const std::lock_guard lock(mutex_);
  if (const auto known = statuses_.find(key); known != statuses_.end()) return known->second;
  const auto probe = probes_.find(path);
  if (probe == probes_.end()) {
    return statuses_[key] = {false, "", "not built into this ampt", ""};
  }
  auto status = probe->second.available(device);
  if (status.runs) {
    auto& mine = checking();
    mine.push_back(key);
    try {
      // A first use under autocast or no_grad must not change what the check computes.
      const c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
      const at::AutoGradMode grad(true);
      status.check = probe->second.self_check(device);
    } catch (const std::exception& error) {
      // One line: a c10::Error's backtrace is no part of what went wrong.
      const auto message = message_of(error);
      status.runs = false;
      status.check = message;
      status.reason = fmt::format("its self-check failed: {}", message);
      warnings_.push_back(fmt::format("{} on {} failed its self-check against ATen, so ATen runs "
                                      "instead: {}",
                                      path_name(path), describe_(device), message));
    }
    mine.pop_back();
  }
  return statuses_[key] = status;
}

bool KernelSupport::runs(FusedPath path, const c10::Device& device) {
  const auto& mine = checking();
  if (std::ranges::find(mine, std::pair{device.index(), path}) != mine.end()) return true;
  return status(path, device).runs;
}

std::vector<std::string> KernelSupport::take_warnings() {
  const std::lock_guard lock(mutex_);
  return std::exchange(warnings_, {});
}

std::string KernelSupport::summary(const c10::Device& device,
                                   const std::vector<FusedPath>& paths) {
  std::vector<std::string> running, instead;
  for (const auto path : paths) {
    const auto s = status(path, device);
    if (s.runs) {
      running.push_back(fmt::format("{} ({})", path_name(path), s.image));
    } else {
      instead.push_back(fmt::format("{} ({})", path_name(path), s.reason));
    }
  }
  std::string line = running.empty() ? "no fused path runs"
                                     : fmt::format("{}", fmt::join(running, ", "));
  if (!instead.empty()) line += fmt::format("; ATen instead of: {}", fmt::join(instead, "; "));
  return line;
}

std::map<FusedPath, PathProbe> own_kernel_probes(const KernelBackend& backend) {
  return {
      {FusedPath::softmax_cross_entropy,
       kernel_probe(backend.softmax_cross_entropy_image, "", check_softmax_cross_entropy)},
      {FusedPath::add_layer_norm,
       kernel_probe(backend.add_layer_norm_image, "", check_add_layer_norm)},
      {FusedPath::fp8_casts, kernel_probe(backend.fp8_quantize_image, "fp8", check_fp8_casts)},
      {FusedPath::adamw, kernel_probe(backend.adamw_image, "", check_adamw)},
      {FusedPath::dequantize, kernel_probe(backend.dequantize_image, "", check_dequantize)},
  };
}

KernelSupport& kernel_support() {
  if (auto* support = override_support()) return *support;
  static KernelSupport support = [] {
    auto probes = own_kernel_probes(cuda_backend());
    probes.emplace(FusedPath::gemm_epilogues,
                   library_probe(0, "", "cuBLASLt", check_gemm_epilogues));
    probes.emplace(FusedPath::fp8_gemm,
                   library_probe(89, "fp8", "torch _scaled_mm", check_fp8_gemm));
    probes.emplace(FusedPath::fp8_rowwise_gemm,
                   library_probe(89, "fp8", "torch _scaled_mm", check_fp8_rowwise_gemm));
    return KernelSupport(std::move(probes), cuda_backend());
  }();
  return support;
}

KernelSupportOverride::KernelSupportOverride(KernelSupport& support)
    : saved_(std::exchange(override_support(), &support)) {}

KernelSupportOverride::~KernelSupportOverride() { override_support() = saved_; }

bool fused_path_runs(FusedPath path, const c10::Device& device) {
  return kernel_support().runs(path, device);
}

const KernelBackend* kernels_for(FusedPath path, const c10::Device& device) {
  auto& support = kernel_support();
  if (device.type() != support.backend().device_type) return nullptr;
  return support.runs(path, device) ? &support.backend() : nullptr;
}

}  // namespace ampt::kernels

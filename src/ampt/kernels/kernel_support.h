// Which of ampt's fused GPU paths run on a device, and why the others do not. Each path is asked
// once per device, at its first use: whether its kernel has an image there (cuda/launch.h) and
// the device has the features it needs, then whether it agrees with its ATen path on a small
// input (the self-check). A path that fails either runs as ATen from then on, and the reasons
// are kept for the startup line, `ampt doctor` and a warning.
#pragma once

#include "ampt/kernels/kernel_backend.h"

#include <c10/core/Device.h>

#include <array>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ampt::kernels {

enum class FusedPath {
  softmax_cross_entropy,  // the fused head's softmax, loss and gradient (fused_classifier)
  add_layer_norm,         // the residual add with the LayerNorm that reads it (add_layer_norm)
  fp8_casts,              // fp8 quantisation into both copies (fp8_quantize)
  gemm_epilogues,         // cuBLASLt's bias, GELU and bias-gradient epilogues (gemm_epilogues)
  fp8_gemm,               // torch's _scaled_mm with per-tensor scales (fp8_gemm)
  fp8_rowwise_gemm,       // torch's _scaled_mm with row-wise scales (fp8_gemm)
  adamw,                  // AdamW writing the O1 half copies in its pass (fused_adamw)
  dequantize,             // a LoRA base's nf4, int8 or fp8 weight to its GEMM's dtype (dequantize)
};

inline constexpr std::array kFusedPaths = {
    FusedPath::softmax_cross_entropy, FusedPath::add_layer_norm, FusedPath::fp8_casts,
    FusedPath::gemm_epilogues,        FusedPath::fp8_gemm,       FusedPath::fp8_rowwise_gemm,
    FusedPath::adamw,                 FusedPath::dequantize};

// "softmax+loss kernel", "add+LayerNorm kernel", …: how the startup line and doctor name it.
std::string_view path_name(FusedPath path);

struct PathStatus {
  bool runs = false;   // the path itself runs here, not its ATen fallback
  std::string image;   // what runs: "sm_86 binary", "compute_120 PTX compiled for 12.1", "cuBLASLt"
  std::string reason;  // why not, when it does not run
  std::string check;   // the self-check: "max relative error 1.2e-03", or what went wrong
};

// What a kernel image means for a path (cuda::KernelImage): runs with that image, or not, and
// why; `feature` names what `image.needs` is for ("fp8").
PathStatus image_status(const abi::KernelImage& image, std::string_view feature);

// How one path is found out on a device.
struct PathProbe {
  // Whether and with what it can run there, before the self-check.
  std::function<PathStatus(const c10::Device&)> available;
  // Runs the path and its ATen path on a small input; returns how close they came (for
  // PathStatus::check), throws when they differ or the path fails.
  std::function<std::string(const c10::Device&)> self_check;
};

class KernelSupport {
 public:
  // `describe` names a device in warnings ("cuda:0 (NVIDIA A100-SXM4-80GB, 8.0)"); the paths
  // launch through the GPU's backend.
  KernelSupport(std::map<FusedPath, PathProbe> probes,
                std::function<std::string(const c10::Device&)> describe);
  // The paths launch through `backend` (which outlives this), which also names the devices.
  KernelSupport(std::map<FusedPath, PathProbe> probes, const KernelBackend& backend);

  const KernelBackend& backend() const { return *backend_; }

  // Whether `path` runs its own kernel on `device` (a CUDA device); the first call per device
  // probes it and runs its self-check. Within that self-check, on its thread, it runs.
  bool runs(FusedPath path, const c10::Device& device);
  PathStatus status(FusedPath path, const c10::Device& device);

  // One line per self-check that failed since the last call: the path, the device, the error.
  std::vector<std::string> take_warnings();

  // "softmax+loss kernel (sm_86 binary), …; ATen instead of: fp8 casts (…)": the paths on
  // `device`, each probed if not yet.
  std::string summary(const c10::Device& device, const std::vector<FusedPath>& paths);

 private:
  std::map<FusedPath, PathProbe> probes_;
  std::function<std::string(const c10::Device&)> describe_;
  const KernelBackend* backend_;
  std::recursive_mutex mutex_;  // a self-check may ask about another path
  std::map<std::pair<c10::DeviceIndex, FusedPath>, PathStatus> statuses_;
  std::vector<std::string> warnings_;
};

// The probes of ampt's own kernels (softmax+loss, add+LayerNorm, fp8 casts, AdamW, dequantize) on
// `backend`'s devices: each kernel file's image there, then its self-check (self_check.h).
std::map<FusedPath, PathProbe> own_kernel_probes(const KernelBackend& backend);

// The process's: the GPU's kernels and libraries with their probes and self-checks, unless a
// KernelSupportOverride is in place.
KernelSupport& kernel_support();

// For its lifetime, `support` is kernel_support(): the tests put the CPU emulation of the
// kernels there, so that the fused paths and their self-checks run over CPU tensors.
class KernelSupportOverride {
 public:
  explicit KernelSupportOverride(KernelSupport& support);
  ~KernelSupportOverride();
  KernelSupportOverride(const KernelSupportOverride&) = delete;
  KernelSupportOverride& operator=(const KernelSupportOverride&) = delete;

 private:
  KernelSupport* saved_;
};

// kernel_support().runs(path, device).
bool fused_path_runs(FusedPath path, const c10::Device& device);

// The backend that runs `path`'s own kernel for tensors on `device`, or null where ATen runs it
// instead (another device type, or the path does not run there).
const KernelBackend* kernels_for(FusedPath path, const c10::Device& device);

}  // namespace ampt::kernels

#include "ampt/train/fused_choice.h"

#include <fmt/format.h>
#include <torch/cuda.h>

#include <algorithm>
#include <chrono>
#include <limits>

namespace ampt::train {

FusedChoice choose_fused(const std::optional<FusedTiming>& timing, const std::string& reason,
                         int64_t plain_bytes, int64_t usable_bytes) {
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  if (plain_bytes > usable_bytes) {
    return {true, fmt::format("Fused kernels: auto: on, for memory: the plain ops would need "
                              "{:.1f} GiB of the GPU's {:.1f} usable",
                              static_cast<double>(plain_bytes) / kGiB,
                              static_cast<double>(usable_bytes) / kGiB)};
  }
  if (!timing) return {true, fmt::format("Fused kernels: auto: on ({})", reason)};
  const bool fused = timing->fused_ms <= timing->plain_ms;
  return {fused, fmt::format("Fused kernels: auto: {}, a forward and backward measured {:.1f} ms "
                             "fused against {:.1f} ms with the plain ops",
                             fused ? "on" : "off (the plain ATen ops)", timing->fused_ms,
                             timing->plain_ms)};
}

FusedTiming time_fused(const std::function<void(bool fused)>& set_fused,
                       const std::function<void()>& pass, const c10::Device& device,
                       int rounds) {
  const auto sync = [&] {
    if (device.is_cuda()) torch::cuda::synchronize(device.index());
  };
  const auto timed = [&](bool fused) {
    set_fused(fused);
    sync();
    const auto start = std::chrono::steady_clock::now();
    pass();
    sync();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
        .count();
  };
  timed(true);  // warm-ups: kernels loaded, workspaces and cuBLAS's choices made
  timed(false);
  FusedTiming best{std::numeric_limits<double>::infinity(),
                   std::numeric_limits<double>::infinity()};
  for (int r = 0; r < rounds; ++r) {
    best.fused_ms = std::min(best.fused_ms, timed(true));
    best.plain_ms = std::min(best.plain_ms, timed(false));
  }
  set_fused(true);
  return best;
}

}  // namespace ampt::train

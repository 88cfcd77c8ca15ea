// --fused_kernels auto: whether a run's transformer takes its fused operations (the chunked head
// and loss that never holds the logits whole, add+LayerNorm, the one-node attention, the MLP
// recomputing its GELU on a GPU) or the plain ATen ops, decided once at startup. Fused, except on
// a GPU where a forward and backward of the run's own micro-batch measures the plain ops faster
// and `ampt recommend`'s estimate says they fit the GPU's memory: the fused head and MLP are also
// memory savings, kept where the batch needs them. The startup line says which and why.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace ampt::train {

struct FusedTiming {
  double fused_ms = 0.0;  // the best measured forward + backward, fused
  double plain_ms = 0.0;  // and with the plain ops
};

struct FusedChoice {
  bool fused = true;
  std::string line;  // the startup line: "Fused kernels: auto: ..."
};

// The choice from the measured times (nullopt: nothing was measured, for `reason`) and the
// plain ops' estimated peak `plain_bytes` against the GPU's `usable_bytes`.
FusedChoice choose_fused(const std::optional<FusedTiming>& timing, const std::string& reason,
                         int64_t plain_bytes, int64_t usable_bytes);

// Times `pass` (one forward and backward) with the fused operations and without (`set_fused`
// switches them), taking turns: the best of `rounds` after one warm-up each, the device
// synchronised around each pass. Leaves the fused operations on.
FusedTiming time_fused(const std::function<void(bool fused)>& set_fused,
                       const std::function<void()>& pass, const c10::Device& device,
                       int rounds = 3);

}  // namespace ampt::train

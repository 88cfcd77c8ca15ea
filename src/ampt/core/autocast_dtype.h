// The dtype autocast gives a matmul on a device type: its autocast dtype where autocast is on
// there, none where it is off. Every place that decides a GEMM's or a fused kernel's dtype under
// autocast (the kernels, the Linear seam, a quantized base, packed attention) asks here, so that
// one rule decides them all.
#pragma once

#include <ATen/autocast_mode.h>

#include <optional>

namespace ampt {

inline std::optional<c10::ScalarType> autocast_dtype(c10::DeviceType device) {
  if (!at::autocast::is_autocast_enabled(device)) return std::nullopt;
  return at::autocast::get_autocast_dtype(device);
}

}  // namespace ampt

// The dtype autocast gives a matmul on a device type: its autocast dtype where autocast is on
// there, none where it is off. Every place that decides a GEMM's or a fused kernel's dtype under
// autocast (the kernels, the Linear seam, a quantized base, packed attention) asks here, so that
// one rule decides them all.
#pragma once

#include <ATen/autocast_mode.h>
#include <ATen/core/Tensor.h>

#include <optional>

namespace ampt {

inline std::optional<c10::ScalarType> autocast_dtype(c10::DeviceType device) {
  if (!at::autocast::is_autocast_enabled(device)) return std::nullopt;
  return at::autocast::get_autocast_dtype(device);
}

// The dtype a matmul computes `x` in: autocast's where it would cast x (an fp32 x while autocast
// is on for its device), else x's own.
inline c10::ScalarType matmul_dtype(const at::Tensor& x) {
  if (x.scalar_type() != at::kFloat) return x.scalar_type();
  return autocast_dtype(x.device().type()).value_or(x.scalar_type());
}

}  // namespace ampt

// The tests' reference for fp8 quantisation: quantise as the recipes do, dequantise again.
#pragma once

#include <torch/torch.h>

namespace ampt::test {

// t quantised to `dtype` and dequantised: per tensor with scale fp8_max / amax, or (rowwise) with
// one power-of-two scale per slice along `dim` (1: per row, 0: per column) from that slice's amax.
inline torch::Tensor dequantised(const torch::Tensor& t, c10::ScalarType dtype, bool rowwise = false,
                                 int64_t dim = 1) {
  const float max = dtype == c10::kFloat8_e5m2 ? 57344.0f : 448.0f;
  const auto magnitude = t.abs().to(torch::kFloat32);
  const auto amax = rowwise ? magnitude.amax(dim, /*keepdim=*/true) : magnitude.amax();
  auto scale = torch::full_like(amax, max) / amax;
  if (rowwise) scale = torch::exp2(torch::floor(torch::log2(scale)));
  return (t.to(torch::kFloat32) * scale).clamp(-max, max).to(dtype).to(torch::kFloat32) / scale;
}

}  // namespace ampt::test

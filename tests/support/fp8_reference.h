// The tests' reference for fp8 quantisation: quantise as the recipes do, dequantise again.
#pragma once

#include "ampt/kernels/fp8_quantize.h"

#include <ATen/cuda/CUDAContext.h>
#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <tuple>
#include <vector>

namespace ampt::test {

inline constexpr auto kE4m3 = c10::kFloat8_e4m3fn;
inline constexpr auto kE5m2 = c10::kFloat8_e5m2;
// A cast that writes every output: the fp8 data, its transpose and the column sums.
inline const kernels::Fp8CastSpec kAll{.data = true, .transposed = true, .column_sums = true};

// An fp8 tensor's bytes, on the host.
inline torch::Tensor bits(const torch::Tensor& fp8) { return fp8.cpu().view(torch::kUInt8); }

// Every device this build can run _scaled_mm on: the CPU, and a GPU of compute capability 8.9+.
inline std::vector<torch::Device> fp8_devices() {
  std::vector<torch::Device> devices{torch::kCPU};
  if (torch::cuda::is_available()) {
    const auto* p = at::cuda::getDeviceProperties(0);
    if (p->major * 10 + p->minor >= 89) devices.emplace_back(torch::kCUDA, 0);
  }
  return devices;
}

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

// Two per-tensor casts of the same values computed by different tanh implementations (a kernel's
// and ATen's): each differs from the other in the last bit of some floats, so an fp8 value on a
// rounding boundary may land one step away, and in the GELU's far tail one rounds 1 + tanh to 0
// where the other keeps a few 1e-8 (which e5m2's range then holds). Checked: both copies within
// one fp8 step, or a millionth of `amax`, once dequantised, and at most 1 in 200 values differing.
inline void check_fp8_close(const kernels::Fp8Cast& got, const kernels::Fp8Cast& want,
                            c10::ScalarType dtype, double amax) {
  const double step = dtype == c10::kFloat8_e5m2 ? 0.25 : 0.125;
  for (const auto& [g8, w8, what] : {std::tuple{got.data, want.data, "data"},
                                     {got.transposed, want.transposed, "transposed"}}) {
    const auto g = g8.to(torch::kFloat32).cpu() * got.inverse.cpu();
    const auto w = w8.to(torch::kFloat32).cpu() * want.inverse.cpu();
    const auto differ = torch::ne(g8.view(torch::kUInt8), w8.view(torch::kUInt8)).sum().item<int64_t>();
    INFO(what << ": " << differ << " of " << g8.numel() << " differ");
    CHECK(torch::all((g - w).abs() <= step * torch::maximum(g.abs(), w.abs()) + 1e-6 * amax)
              .item<bool>());
    CHECK(differ <= g8.numel() / 200);
  }
}

}  // namespace ampt::test

#include "ampt/precision/nf4.h"

#include "ampt/core/errors.h"
#include "ampt/kernels/dequantize.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace ampt::precision {
namespace {

// The midpoints between neighbouring NormalFloat values.
const std::array<float, 15>& nf4_midpoints() {
  static const auto bounds = [] {
    std::array<float, 15> mid{};
    const auto& v = kernels::nf4_values();
    for (std::size_t i = 0; i < mid.size(); ++i) mid[i] = (v[i] + v[i + 1]) / 2.0f;
    return mid;
  }();
  return bounds;
}

torch::Tensor nf4_bounds() {
  const auto& mid = nf4_midpoints();
  return torch::tensor(std::vector<float>(mid.begin(), mid.end()));
}

// Index of the nearest NormalFloat value, a tie to the lower (torch.bucketize over the
// midpoints, right=false).
int nf4_code(float scaled) {
  const auto& bounds = nf4_midpoints();
  return static_cast<int>(std::lower_bound(bounds.begin(), bounds.end(), scaled) - bounds.begin());
}

// bitsandbytes' native 8-bit blockwise quantization on a CPU (cpu_ops.cpp): not the nearest
// code but a 65536-entry table over [-1, 1], which differs from it for about 0.1% of values.
uint8_t dynamic_code(float scaled) {
  static const std::vector<uint8_t> table = [] {
    const auto& code = kernels::dynamic_map();
    std::array<float, 255> mid{};
    for (std::size_t i = 0; i < mid.size(); ++i) mid[i] = 0.5f * (code[i] + code[i + 1]);
    std::vector<uint8_t> out(65536);
    for (int j = 0; j < 65536; ++j) {
      const float at = -1.0f + (2.0f * static_cast<float>(j)) / 65535.0f;
      out[j] = static_cast<uint8_t>(std::lower_bound(mid.begin(), mid.end(), at) - mid.begin());
    }
    return out;
  }();
  // The x86 wheel's one fused multiply-add, then truncation.
  const float at = std::fma((scaled + 1.0f) * 0.5f, 65535.0f, 0.5f);
  return table[static_cast<std::size_t>(static_cast<int>(at))];
}

}  // namespace

int64_t Nf4Weight::numel() const {
  int64_t n = 1;
  for (const auto d : shape) n *= d;
  return n;
}

int64_t nf4_bytes(int64_t numel) {
  const int64_t blocks = (numel + Nf4Weight::kBlock - 1) / Nf4Weight::kBlock;
  const int64_t outer = (blocks + Nf4Weight::kAbsmaxBlock - 1) / Nf4Weight::kAbsmaxBlock;
  return (numel + 1) / 2 + blocks + 4 * outer + 4;
}

Nf4Weight quantize_nf4(const torch::Tensor& weight) {
  const auto dtype = weight.scalar_type();
  if (dtype != c10::kFloat && dtype != c10::kBFloat16 && dtype != c10::kHalf) {
    throw RuntimeError(fmt::format("nf4 quantizes fp32, bf16 or fp16 weights, not {}",
                                   c10::toString(dtype)));
  }
  const auto flat = weight.detach().reshape(-1);
  const int64_t n = flat.numel();
  const int64_t blocks = (n + Nf4Weight::kBlock - 1) / Nf4Weight::kBlock;
  const int64_t full = n - n % Nf4Weight::kBlock;
  auto absmax = torch::empty({blocks}, torch::kFloat);
  Nf4Weight out;
  out.shape = weight.sizes().vec();
  out.dtype = dtype;
  out.codes = torch::empty({(n + 1) / 2}, torch::kUInt8);
  // Full blocks scale by the fp32 reciprocal, an all-zero block keeping absmax 0: ATen's ops,
  // each the fp32 operation bitsandbytes does (a division for 1 / m, one multiply, a clamp, the
  // nearest value by its midpoints), over every thread. A chunk of blocks at a time, so that
  // the fp32 and integer intermediates stay a few MiB whatever the weight's size (loading
  // quantizes while the model is built): each block's bytes are the same.
  constexpr int64_t kChunk = int64_t{1} << 18;
  const auto bounds = nf4_bounds();
  for (int64_t start = 0; start < full; start += kChunk) {
    const int64_t count = std::min(kChunk, full - start);
    const auto x =
        flat.narrow(0, start, count).to(torch::kCPU, torch::kFloat).view({-1, Nf4Weight::kBlock});
    const auto m = x.abs().amax(1);
    absmax.narrow(0, start / Nf4Weight::kBlock, count / Nf4Weight::kBlock).copy_(m);
    const auto inverse = torch::ones_like(m) / m.clamp_min(1e-38f);
    const auto scaled = (x * inverse.unsqueeze(1)).clamp(-1.0f, 1.0f);
    const auto pairs =
        torch::bucketize(scaled.reshape(-1), bounds, /*out_int32=*/true).view({-1, 2});
    out.codes.narrow(0, start / 2, count / 2)
        .copy_(pairs.select(1, 0).bitwise_left_shift(4).bitwise_or(pairs.select(1, 1)));
  }
  if (full < n) {
    // The short last block divides, and keeps the clamped absmax (bitsandbytes' own quirk); an
    // odd count pads a 0.0 (code 7).
    const auto tail = flat.narrow(0, full, n - full).to(torch::kCPU, torch::kFloat).contiguous();
    const float* x = tail.data_ptr<float>();
    const int64_t count = tail.numel();
    float m = 0.0f;
    for (int64_t i = 0; i < count; ++i) m = std::max(m, std::abs(x[i]));
    const float clamped = std::max(m, 1e-38f);
    absmax.data_ptr<float>()[blocks - 1] = clamped;
    auto* q = out.codes.data_ptr<uint8_t>() + full / 2;
    for (int64_t i = 0; i < count; i += 2) {
      const int high = nf4_code(std::clamp(x[i] / clamped, -1.0f, 1.0f));
      const int low = i + 1 < count ? nf4_code(std::clamp(x[i + 1] / clamped, -1.0f, 1.0f)) : 7;
      q[i / 2] = static_cast<uint8_t>(high << 4 | low);
    }
  }
  // Double quantization. The mean is ATen's fp32 reduction, as bitsandbytes takes it.
  out.offset = absmax.mean().item<float>();
  const float* am = absmax.data_ptr<float>();
  const int64_t outer = (blocks + Nf4Weight::kAbsmaxBlock - 1) / Nf4Weight::kAbsmaxBlock;
  out.absmax = torch::empty({blocks}, torch::kUInt8);
  out.absmax2 = torch::empty({outer}, torch::kFloat);
  auto* codes8 = out.absmax.data_ptr<uint8_t>();
  float* scale = out.absmax2.data_ptr<float>();
  for (int64_t b = 0; b < outer; ++b) {
    const int64_t begin = b * Nf4Weight::kAbsmaxBlock;
    const int64_t end = std::min(blocks, begin + Nf4Weight::kAbsmaxBlock);
    float m = 0.0f;
    for (int64_t i = begin; i < end; ++i) m = std::max(m, std::abs(am[i] - out.offset));
    scale[b] = m;
    if (m == 0.0f) {  // code 0 (-0.99296875), not the 0.0 entry, as bitsandbytes writes it
      std::fill(codes8 + begin, codes8 + end, uint8_t{0});
      continue;
    }
    const float inverse = 1.0f / m;
    for (int64_t i = begin; i < end; ++i) {
      codes8[i] = dynamic_code(std::clamp((am[i] - out.offset) * inverse, -1.0f, 1.0f));
    }
  }
  return out;
}

torch::Tensor dequantize_nf4(const Nf4Weight& weight, c10::ScalarType dtype) {
  return kernels::dequantize_nf4(
             {weight.codes, weight.absmax, weight.absmax2, weight.offset, weight.numel()}, dtype)
      .reshape(weight.shape);
}

}  // namespace ampt::precision

#include "ampt/models/rotary.h"

#include "ampt/kernels/batch_invariant.h"

#include <cmath>
#include <numbers>

namespace ampt::models {

torch::Tensor rope_inv_freq(const LlamaDims& dims) {
  const int64_t d = dims.head_dim();
  // Float32 throughout, in transformers' order of operations, so the angles are its angles bit
  // for bit.
  auto exponents = torch::arange(0, d, 2, torch::kInt64).to(torch::kFloat32) / static_cast<double>(d);
  auto inv_freq = 1.0 / torch::pow(dims.rope_theta, exponents);
  if (!dims.rope_llama3) return inv_freq;
  const auto& s = *dims.rope_llama3;
  const double context = static_cast<double>(s.original_context);
  const double low_freq_wavelen = context / s.low_freq_factor;
  const double high_freq_wavelen = context / s.high_freq_factor;
  const auto wavelen = 2 * std::numbers::pi / inv_freq;
  // Long wavelengths are stretched by `factor`, short ones kept, the band between blended.
  auto scaled = torch::where(wavelen > low_freq_wavelen, inv_freq / s.factor, inv_freq);
  const auto smooth = (context / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
  const auto smoothed = (1 - smooth) * scaled / s.factor + smooth * scaled;
  const auto medium = (wavelen >= high_freq_wavelen).logical_and(wavelen <= low_freq_wavelen);
  return torch::where(medium, smoothed, scaled);
}

namespace {

// positions [..., T] int64 → cos and sin [..., T, head_dim].
RotaryAngles angles_of(const torch::Tensor& inv_freq, const torch::Tensor& positions) {
  // An elementwise product, not a matmul: autocast would run a matmul in half precision.
  const auto freqs = positions.to(torch::kFloat32).unsqueeze(-1) * inv_freq;
  const auto angles = torch::cat({freqs, freqs}, -1);
  // ATen's cos and sin give an element other bits at the end of a call than in its middle.
  if (kernels::batch_invariant()) {
    auto [cos, sin] = kernels::invariant_cos_sin(angles);
    return {std::move(cos), std::move(sin)};
  }
  return {angles.cos(), angles.sin()};
}

}  // namespace

RotaryAngles rotary_angles(const torch::Tensor& inv_freq, int64_t start, int64_t length) {
  return angles_of(inv_freq,
                   torch::arange(start, start + length, inv_freq.options().dtype(torch::kInt64)));
}

RotaryAngles rotary_angles(const torch::Tensor& inv_freq, const torch::Tensor& positions) {
  const auto angles = angles_of(inv_freq, positions.to(inv_freq.device()));
  return {angles.cos.unsqueeze(1), angles.sin.unsqueeze(1)};
}

torch::Tensor apply_rotary(const torch::Tensor& x, const RotaryAngles& angles) {
  const int64_t half = x.size(-1) / 2;
  const auto rotated = torch::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  return x * angles.cos.to(x.dtype()) + rotated * angles.sin.to(x.dtype());
}

}  // namespace ampt::models

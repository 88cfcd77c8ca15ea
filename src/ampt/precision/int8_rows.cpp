#include "ampt/precision/int8_rows.h"

#include "ampt/core/errors.h"

#include <fmt/format.h>

namespace ampt::precision {

Int8Rows quantize_int8_rows(const torch::Tensor& weight) {
  if (weight.dim() != 2 || !weight.is_floating_point()) {
    throw RuntimeError(fmt::format("int8 rows quantize a floating-point matrix, not a {}-d {}",
                                   weight.dim(), c10::toString(weight.scalar_type())));
  }
  const auto w = weight.detach().to(torch::kFloat);
  const auto scales = w.abs().amax(1) / 127.0f;
  // A zero row divides by 1 instead, and its values stay 0.
  const auto divisor = torch::where(scales > 0, scales, torch::ones_like(scales));
  const auto values = (w / divisor.unsqueeze(1)).round().clamp(-127, 127).to(torch::kInt8);
  return {values, scales};
}

torch::Tensor dequantize_int8_rows(const Int8Rows& weight, c10::ScalarType dtype) {
  return (weight.values.to(torch::kFloat) * weight.scales.unsqueeze(1)).to(dtype);
}

}  // namespace ampt::precision

#include "ampt/precision/row_scaled.h"

#include "ampt/core/errors.h"
#include "ampt/kernels/dequantize.h"

#include <fmt/format.h>

namespace ampt::precision {

RowScaled quantize_rows(const torch::Tensor& weight, RowCode code) {
  if (weight.dim() != 2 || !weight.is_floating_point()) {
    throw RuntimeError(fmt::format("row scaling quantizes a floating-point matrix, not a {}-d {}",
                                   weight.dim(), c10::toString(weight.scalar_type())));
  }
  const auto w = weight.detach().to(torch::kFloat);
  const float largest = code == RowCode::int8 ? 127.0f : 448.0f;
  const auto scales = w.abs().amax(1) / largest;
  // A zero row divides by 1 instead, and its values stay 0.
  const auto divisor = torch::where(scales > 0, scales, torch::ones_like(scales));
  const auto scaled = w / divisor.unsqueeze(1);
  const auto values = code == RowCode::int8
                          ? scaled.round().clamp(-127, 127).to(torch::kInt8)
                          : scaled.clamp(-largest, largest).to(torch::kFloat8_e4m3fn);
  return {values, scales};
}

torch::Tensor dequantize_rows(const RowScaled& weight, c10::ScalarType dtype) {
  return kernels::dequantize_rows(weight.values, weight.scales, dtype);
}

}  // namespace ampt::precision

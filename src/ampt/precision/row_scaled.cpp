#include "ampt/precision/row_scaled.h"

#include "ampt/core/errors.h"

#include <fmt/format.h>

#include <algorithm>

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
  // Rows a chunk at a time, so that the fp32 intermediates stay a few MiB whatever the weight's
  // size; each value is one fp32 multiply rounded once to `dtype`.
  const int64_t rows = weight.values.size(0), cols = std::max<int64_t>(1, weight.values.size(1));
  const int64_t chunk = std::max<int64_t>(1, (int64_t{1} << 18) / cols);
  auto out = torch::empty(weight.values.sizes(), weight.scales.options().dtype(dtype));
  for (int64_t start = 0; start < rows; start += chunk) {
    const int64_t count = std::min(chunk, rows - start);
    out.narrow(0, start, count)
        .copy_(weight.values.narrow(0, start, count).to(torch::kFloat) *
               weight.scales.narrow(0, start, count).unsqueeze(1));
  }
  return out;
}

}  // namespace ampt::precision

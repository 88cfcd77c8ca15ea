// A frozen weight stored one byte per value with one fp32 scale per output row:
// - int8: LLM.int8()'s row-wise absmax without its outlier split: each row divided by its
//   absmax / 127 and rounded to the nearest integer, ties to even;
// - e4m3: each row divided by its absmax / 448 (e4m3's largest finite value) and cast to
//   float8_e4m3fn, rounding to the nearest representable value.
#pragma once

#include "ampt/kernels/kernel_abi.h"

#include <torch/types.h>

namespace ampt::precision {

using RowCode = kernels::abi::RowCode;  // the kernels' (cuda/dequantize.cu) codes

inline int64_t row_scaled_bytes(int64_t rows, int64_t cols) { return rows * cols + 4 * rows; }

struct RowScaled {
  torch::Tensor values;  // int8 or float8_e4m3fn [out, in]
  torch::Tensor scales;  // float32 [out]: absmax / the code's largest value (0 for a zero row)
  int64_t bytes() const { return row_scaled_bytes(values.size(0), values.size(1)); }
};

RowScaled quantize_rows(const torch::Tensor& weight, RowCode code);
torch::Tensor dequantize_rows(const RowScaled& weight, c10::ScalarType dtype);

}  // namespace ampt::precision

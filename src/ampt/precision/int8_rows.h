// int8 storage of a frozen weight, one scale per output row (LLM.int8()'s row-wise absmax,
// without its outlier split): each row divided by its absmax / 127 and rounded to the nearest
// integer, ties to even.
#pragma once

#include <torch/types.h>

namespace ampt::precision {

// What int8 rows of a [rows, cols] weight hold: a byte an element and an fp32 scale a row. The
// memory estimate counts the same bytes.
inline int64_t int8_rows_bytes(int64_t rows, int64_t cols) { return rows * cols + 4 * rows; }

struct Int8Rows {
  torch::Tensor values;  // int8 [out, in]
  torch::Tensor scales;  // float32 [out]: absmax / 127 (0 for a zero row)
  int64_t bytes() const { return int8_rows_bytes(values.size(0), values.size(1)); }
};

// `weight` [out, in] (fp32, bf16 or fp16), on its device.
Int8Rows quantize_int8_rows(const torch::Tensor& weight);
// values · scale in fp32, rounded once to `dtype`.
torch::Tensor dequantize_int8_rows(const Int8Rows& weight, c10::ScalarType dtype);

}  // namespace ampt::precision

// A LoRA run's frozen block Linear weight as --base_dtype stores it (nf4.h, int8_rows.h), and the
// GEMM over it: dequantized in the compute dtype for the forward and again for the input's
// gradient, never saved whole for the backward and never given a gradient (QLoRA's
// MatMul4Bit).
#pragma once

#include "ampt/config/config.h"
#include "ampt/precision/int8_rows.h"
#include "ampt/precision/nf4.h"

#include <torch/custom_class.h>
#include <torch/types.h>

#include <optional>

namespace ampt::precision {

class QuantizedWeight : public torch::CustomClassHolder {
 public:
  // `format` nf4 or int8; the storage stays on `weight`'s device.
  QuantizedWeight(const torch::Tensor& weight, config::BaseDtype format);

  torch::Tensor dequantize(c10::ScalarType dtype) const;
  int64_t bytes() const;
  config::BaseDtype format() const { return format_; }

 private:
  config::BaseDtype format_;
  std::optional<Nf4Weight> nf4_;
  std::optional<Int8Rows> int8_;
};

// x·Wᵀ + b with W = `weight` dequantized in x's compute dtype (autocast's where it is on).
// `bias` may be undefined; it is frozen too.
torch::Tensor quantized_linear(const torch::Tensor& x,
                               const c10::intrusive_ptr<QuantizedWeight>& weight,
                               const torch::Tensor& bias);

}  // namespace ampt::precision

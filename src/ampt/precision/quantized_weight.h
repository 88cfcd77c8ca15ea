// A LoRA run's frozen block Linear weight as --base_dtype stores it (nf4.h, row_scaled.h, or a
// plain half tensor), and the
// GEMM over it: dequantized in the compute dtype for the forward and again for the input's
// gradient, never saved whole for the backward and never given a gradient (QLoRA's
// MatMul4Bit).
#pragma once

#include "ampt/config/config.h"
#include "ampt/precision/row_scaled.h"
#include "ampt/precision/nf4.h"

#include <torch/custom_class.h>
#include <torch/types.h>

#include <optional>
#include <vector>

namespace ampt::precision {

class QuantizedWeight : public torch::CustomClassHolder {
 public:
  // `format` nf4, int8, fp8, bf16 or fp16; the storage is kept on `device` (nf4 quantizes on the
  // CPU, where its bytes are bitsandbytes'). `weight` is a matrix [out, in], or a stack of them
  // (an expert group's [E, out, in]), which int8 and fp8 scale by each matrix's rows and nf4
  // takes as the flat row-major sequence it always quantizes.
  QuantizedWeight(const torch::Tensor& weight, config::BaseDtype format, c10::Device device);

  torch::Tensor dequantize(c10::ScalarType dtype) const;
  int64_t bytes() const;
  config::BaseDtype format() const { return format_; }
  // The tensors that hold it (ZeRO-3 shards and gathers them as bytes).
  std::vector<torch::Tensor> tensors() const;

 private:
  config::BaseDtype format_;
  std::vector<int64_t> shape_;
  std::optional<Nf4Weight> nf4_;
  std::optional<RowScaled> rows_;  // int8, fp8
  torch::Tensor half_;             // bf16, fp16
};

// x·Wᵀ + b with W = `weight` dequantized in x's compute dtype (autocast's where it is on).
// `bias` may be undefined; it is frozen too.
torch::Tensor quantized_linear(const torch::Tensor& x,
                               const c10::intrusive_ptr<QuantizedWeight>& weight,
                               const torch::Tensor& bias);

}  // namespace ampt::precision

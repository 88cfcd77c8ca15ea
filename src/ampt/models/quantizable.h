// The frozen matmul weights --base_dtype stores quantized (QLoRA's base): a Linear's weight and
// an expert group's two 3-D weights. A module holding such weights derives from
// QuantizableWeights; a stored weight's parameter is left a placeholder of its shape
// (precision/placeholder.h), so names, shapes and counts stay what they were, and the storage
// stands for its values. Loading (train/pretrained.h), ZeRO-3's frozen shards, LoRA's merged
// export and --base_dtype itself find them all through this one seam, whatever module holds them.
#pragma once

#include "ampt/config/config.h"
#include "ampt/precision/quantized_weight.h"

#include <torch/nn/module.h>
#include <torch/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ampt::models {

class QuantizableWeights {
 public:
  virtual ~QuantizableWeights() = default;

  // The names within the module of the weights a storage may stand for, in a fixed order
  // (a Linear's "weight"; the experts' "gate_up_proj", "down_proj").
  virtual const std::vector<std::string>& quantizable_names() const = 0;
  // Weight i's parameter.
  virtual torch::Tensor& quantizable_parameter(size_t i) = 0;

  // Weight i's storage; null while the parameter holds its values.
  const c10::intrusive_ptr<precision::QuantizedWeight>& quantized(size_t i) const;
  // Whether weight i awaits its values: a placeholder (made under a DeferredWeights, linear.h)
  // that no storage stands for.
  bool awaiting(size_t i);
  // Stores `value` (weight i's values, in the dtype the base is held in) in `format` on the
  // parameter's device, and leaves the parameter a placeholder.
  void quantize(size_t i, const torch::Tensor& value, config::BaseDtype format);

 private:
  std::vector<c10::intrusive_ptr<precision::QuantizedWeight>> stored_;
};

// One quantizable weight under a root module: its dotted name, its owner and its index there.
struct QuantizableWeight {
  std::string name;
  QuantizableWeights* owner = nullptr;
  size_t index = 0;
  const c10::intrusive_ptr<precision::QuantizedWeight>& quantized() const {
    return owner->quantized(index);
  }
  torch::Tensor& parameter() const { return owner->quantizable_parameter(index); }
};

// Every quantizable weight under `root`, in module order.
std::vector<QuantizableWeight> quantizable_weights(const torch::nn::Module& root);

// Those whose values are awaited (QuantizableWeights::awaiting), by dotted name.
std::map<std::string, QuantizableWeight> awaiting_weights(const torch::nn::Module& root);

// --base_dtype nf4, int8, fp8, bf16 or fp16: stores each frozen quantizable weight under `root`
// that is not stored yet in `format` and lets its dense tensor go. Returns the bytes all the
// stored weights hold.
int64_t quantize_base(const torch::nn::Module& root, config::BaseDtype format);

}  // namespace ampt::models

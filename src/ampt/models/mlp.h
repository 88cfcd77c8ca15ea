// A multi-layer perceptron classifier: the embedded default model.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/linear.h>

namespace ampt::models {

// Linear → GELU blocks of width `hidden`, then a linear head to `classes` logits.
class MlpImpl : public torch::nn::Module {
 public:
  MlpImpl(int64_t in_features, int64_t hidden, int64_t layers, int64_t classes);
  // x: [B, ...] with in_features values per sample (images are flattened) → [B, classes].
  torch::Tensor forward(const torch::Tensor& x);
  // Multiply-accumulates of one sample's forward pass: every weight is used once.
  int64_t macs_per_sample() const;

 private:
  torch::nn::ModuleList blocks_;
  torch::nn::Linear head_{nullptr};
};
TORCH_MODULE(Mlp);

}  // namespace ampt::models

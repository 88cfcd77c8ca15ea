#include "ampt/models/mlp.h"

#include "ampt/precision/precision_islands.h"
#include <torch/nn/functional/activation.h>

namespace ampt::models {

// The fp32-island hooks every submodule call goes through (precision/precision_islands.h).
using precision::call;

MlpImpl::MlpImpl(int64_t in_features, int64_t hidden, int64_t layers, int64_t classes) {
  int64_t width = in_features;
  for (int64_t i = 0; i < layers; ++i) {
    blocks_->push_back(torch::nn::Linear(width, hidden));
    width = hidden;
  }
  register_module("blocks", blocks_);
  head_ = register_module("head", torch::nn::Linear(width, classes));
}

torch::Tensor MlpImpl::forward(const torch::Tensor& x) {
  auto h = x.flatten(1);
  for (const auto& block : *blocks_) h = torch::gelu(call(block->as<torch::nn::Linear>(), h));
  return call(head_, h);
}

int64_t MlpImpl::macs_per_sample() const {
  int64_t macs = head_->weight.numel();
  for (const auto& block : *blocks_) macs += block->as<torch::nn::Linear>()->weight.numel();
  return macs;
}

}  // namespace ampt::models

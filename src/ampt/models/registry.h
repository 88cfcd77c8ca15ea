// Builds the model named by the configuration.
#pragma once

#include "ampt/config/config.h"

#include <torch/nn/module.h>

#include <functional>
#include <memory>

namespace ampt::models {

// What a model needs to know about its data.
struct DataShape {
  int64_t features = 0;  // input width
  int64_t classes = 0;   // output logits per position
};

// A model as the trainer sees it: parameters to optimise and a forward to logits.
struct Model {
  std::shared_ptr<torch::nn::Module> module;
  std::function<torch::Tensor(const torch::Tensor&)> forward;
};

// Builds the configured model with its parameters initialised from the torch seed that the
// caller set, so the same seed always gives the same weights.
Model make_model(const config::Config& config, const DataShape& shape);

int64_t parameter_count(const torch::nn::Module& module);

}  // namespace ampt::models

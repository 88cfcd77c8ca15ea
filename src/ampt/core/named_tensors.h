// Tensors with names: model parameters, optimizer state, checkpoint contents.
#pragma once

#include <torch/types.h>

#include <string>
#include <utility>
#include <vector>

namespace ampt {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

}  // namespace ampt

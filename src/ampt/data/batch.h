// One training batch as the model consumes it.
#pragma once

#include <torch/types.h>

namespace ampt::data {

struct Batch {
  torch::Tensor inputs;
  torch::Tensor targets;
};

}  // namespace ampt::data

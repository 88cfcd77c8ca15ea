// The keys and values a language model has computed so far in generation.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <utility>
#include <vector>

namespace ampt::models {

// One (keys, values) pair per block, [B, key/value heads, positions, head_dim] each (undefined
// until the prompt has run).
struct KvCache {
  std::vector<std::pair<torch::Tensor, torch::Tensor>> layers;
  int64_t length = 0;  // positions held
};

}  // namespace ampt::models

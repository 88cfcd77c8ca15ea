// A seeded, learnable classification dataset that needs no files: the embedded default.
#pragma once

#include "ampt/data/batch.h"

#include <cstdint>

namespace ampt::data {

// Gaussian inputs labelled by a fixed random teacher network (features → 64 tanh units →
// classes, label = argmax). The labels are a smooth function of the inputs, so an MLP can learn
// them and the loss falls well below chance (ln classes); the same seed gives the same data.
struct SyntheticClassification {
  int64_t features = 0;
  int64_t classes = 0;
  torch::Tensor inputs;   // [samples, features] float32
  torch::Tensor targets;  // [samples] int64

  SyntheticClassification(int64_t samples, int64_t features, int64_t classes, uint64_t seed);
};

}  // namespace ampt::data

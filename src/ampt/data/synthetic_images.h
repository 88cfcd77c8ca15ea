// A seeded, learnable image classification dataset that needs no files: the CNN's default.
#pragma once

#include "ampt/data/dataset.h"

#include <cstdint>

namespace ampt::data {

// Each class has a fixed random pattern of 8x8-pixel blocks; an image is its class's pattern plus
// per-pixel noise of the same strength, clamped to [0, 1]. A sample is computed when gathered
// from (seed, index), so the dataset costs no memory and one index always gives one image.
class SyntheticImages : public Dataset {
 public:
  static constexpr int64_t kChannels = 3;
  static constexpr int64_t kSide = 32;

  SyntheticImages(int64_t samples, int64_t classes, uint64_t seed);

  int64_t size() const override { return labels_.size(0); }
  Batch gather(const std::vector<int64_t>& indices) const override;

 private:
  torch::Tensor patterns_;  // [classes, 3, 32, 32] float32
  torch::Tensor labels_;    // [samples] int64
  uint64_t seed_;
};

}  // namespace ampt::data

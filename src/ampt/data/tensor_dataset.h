// Samples held in memory as two tensors: the synthetic features and decoded image files.
#pragma once

#include "ampt/data/dataset.h"

namespace ampt::data {

// inputs [N, ...] and targets [N] (int64 classes). uint8 inputs are images stored as bytes (a
// quarter of the memory of float32) and are delivered as float32 x / 255 in [0, 1].
class TensorDataset : public Dataset {
 public:
  TensorDataset(torch::Tensor inputs, torch::Tensor targets);

  int64_t size() const override { return inputs_.size(0); }
  Batch gather(const std::vector<int64_t>& indices) const override;

 private:
  torch::Tensor inputs_;
  torch::Tensor targets_;
};

}  // namespace ampt::data

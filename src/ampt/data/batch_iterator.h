// Walks an in-memory dataset in shuffled, fixed-size batches, epoch after epoch.
#pragma once

#include "ampt/data/batch.h"

#include <ATen/core/Generator.h>

#include <cstdint>

namespace ampt::data {

// Each epoch visits a fresh permutation drawn from a generator seeded once, so a run is
// reproducible; the last incomplete batch is dropped so every step sees `batch_size` samples.
class BatchIterator {
 public:
  // `inputs` and `targets` share their first dimension; batches are delivered on `device`.
  BatchIterator(torch::Tensor inputs, torch::Tensor targets, int64_t batch_size, uint64_t seed,
                const torch::Device& device);

  Batch next();
  int64_t batches_per_epoch() const { return batches_per_epoch_; }
  int64_t epoch() const { return epoch_; }  // 0-based epoch of the last batch returned

 private:
  void start_epoch();

  torch::Tensor inputs_;
  torch::Tensor targets_;
  int64_t batch_size_;
  int64_t batches_per_epoch_;
  at::Generator generator_;
  torch::Tensor order_;
  int64_t position_ = 0;
  int64_t epoch_ = -1;
};

}  // namespace ampt::data

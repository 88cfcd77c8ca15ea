// Walks an in-memory dataset in shuffled, fixed-size batches, epoch after epoch.
#pragma once

#include "ampt/data/batch.h"

#include <cstdint>

namespace ampt::data {

// Where the next batch comes from: a checkpoint saves it and a resumed run starts there.
struct LoaderState {
  int64_t epoch = 0;
  int64_t position = 0;  // batches already taken from this epoch
};

// Each epoch's order is a permutation drawn from a generator seeded by (seed, epoch) alone, so
// a run is reproducible and resumes mid-epoch exactly; the last incomplete batch is dropped so
// every step sees `batch_size` samples.
class BatchIterator {
 public:
  // `inputs` and `targets` share their first dimension; batches are delivered on `device`.
  BatchIterator(torch::Tensor inputs, torch::Tensor targets, int64_t batch_size, uint64_t seed,
                const torch::Device& device, LoaderState start = {});

  Batch next();
  int64_t batches_per_epoch() const { return batches_per_epoch_; }
  LoaderState state() const { return state_; }

 private:
  void shuffle();

  torch::Tensor inputs_;
  torch::Tensor targets_;
  int64_t batch_size_;
  int64_t batches_per_epoch_;
  uint64_t seed_;
  LoaderState state_;
  torch::Tensor order_;
};

}  // namespace ampt::data

#include "ampt/data/batch_iterator.h"

#include "ampt/core/errors.h"

#include <ATen/CPUGeneratorImpl.h>

#include <string>

namespace ampt::data {

BatchIterator::BatchIterator(torch::Tensor inputs, torch::Tensor targets, int64_t batch_size,
                             uint64_t seed, const torch::Device& device)
    : batch_size_(batch_size),
      batches_per_epoch_(inputs.size(0) / batch_size),
      generator_(at::detail::createCPUGenerator(seed)) {
  if (batches_per_epoch_ == 0) {
    throw RuntimeError("dataset has " + std::to_string(inputs.size(0)) +
                       " samples, fewer than one batch of batch_size " +
                       std::to_string(batch_size) + "; lower batch_size or add data");
  }
  // The whole dataset is small enough to live on the device, so batches are gathered there.
  inputs_ = inputs.to(device);
  targets_ = targets.to(device);
  start_epoch();
  epoch_ = 0;
}

void BatchIterator::start_epoch() {
  order_ = torch::randperm(inputs_.size(0), generator_, torch::dtype(torch::kInt64))
               .to(inputs_.device());
  position_ = 0;
}

Batch BatchIterator::next() {
  if (position_ == batches_per_epoch_) {
    start_epoch();
    ++epoch_;
  }
  const auto index = order_.narrow(0, position_ * batch_size_, batch_size_);
  ++position_;
  return {inputs_.index_select(0, index), targets_.index_select(0, index)};
}

}  // namespace ampt::data

#include "ampt/data/batch_iterator.h"

#include "ampt/core/errors.h"

#include <ATen/CPUGeneratorImpl.h>

#include <string>

namespace ampt::data {

BatchIterator::BatchIterator(torch::Tensor inputs, torch::Tensor targets, int64_t batch_size,
                             uint64_t seed, const torch::Device& device, LoaderState start)
    : batch_size_(batch_size), batches_per_epoch_(inputs.size(0) / batch_size), seed_(seed),
      state_(start) {
  if (batches_per_epoch_ == 0) {
    throw RuntimeError("dataset has " + std::to_string(inputs.size(0)) +
                       " samples, fewer than one batch of batch_size " +
                       std::to_string(batch_size) + "; lower batch_size or add data");
  }
  // The whole dataset is small enough to live on the device, so batches are gathered there.
  inputs_ = inputs.to(device);
  targets_ = targets.to(device);
  shuffle();
}

void BatchIterator::shuffle() {
  // A golden-ratio stride keeps the per-epoch seeds of nearby run seeds apart.
  auto generator = at::detail::createCPUGenerator(
      seed_ + static_cast<uint64_t>(state_.epoch) * 0x9E3779B97F4A7C15ULL);
  order_ = torch::randperm(inputs_.size(0), generator, torch::dtype(torch::kInt64))
               .to(inputs_.device());
}

Batch BatchIterator::next() {
  if (state_.position == batches_per_epoch_) {
    state_ = {state_.epoch + 1, 0};
    shuffle();
  }
  const auto index = order_.narrow(0, state_.position * batch_size_, batch_size_);
  ++state_.position;
  return {inputs_.index_select(0, index), targets_.index_select(0, index)};
}

}  // namespace ampt::data

#include "ampt/data/split.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace ampt::data {

Subset::Subset(std::shared_ptr<const Dataset> base, std::vector<int64_t> indices)
    : base_(std::move(base)), indices_(std::move(indices)) {}

Batch Subset::gather(const std::vector<int64_t>& indices) const {
  std::vector<int64_t> mapped;
  mapped.reserve(indices.size());
  for (const int64_t index : indices) mapped.push_back(indices_.at(static_cast<size_t>(index)));
  return base_->gather(mapped);
}

SplitIndices split_indices(int64_t n, double val_fraction, uint64_t seed) {
  const auto val_count = static_cast<int64_t>(std::llround(static_cast<double>(n) * val_fraction));
  SplitIndices split;
  if (val_count == 0) {
    split.train.resize(static_cast<size_t>(n));
    std::iota(split.train.begin(), split.train.end(), int64_t{0});
    return split;
  }
  auto generator = at::detail::createCPUGenerator(seed);
  const auto order = torch::randperm(n, generator, torch::kInt64);
  const int64_t* first = order.data_ptr<int64_t>();
  split.val.assign(first, first + val_count);
  split.train.assign(first + val_count, first + n);
  std::ranges::sort(split.val);
  std::ranges::sort(split.train);
  return split;
}

TrainVal split_dataset(std::shared_ptr<const Dataset> base, double val_fraction, uint64_t seed) {
  auto split = split_indices(base->size(), val_fraction, seed);
  if (split.val.empty()) return {std::move(base), nullptr};
  return {std::make_shared<Subset>(base, std::move(split.train)),
          std::make_shared<Subset>(base, std::move(split.val))};
}

}  // namespace ampt::data

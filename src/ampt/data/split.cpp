#include "ampt/data/split.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>

namespace ampt::data {

Subset::Subset(std::shared_ptr<const Dataset> base, std::vector<int64_t> indices)
    : base_(std::move(base)), indices_(std::move(indices)) {}

Batch Subset::gather(const std::vector<int64_t>& indices) const {
  std::vector<int64_t> mapped;
  mapped.reserve(indices.size());
  for (const int64_t index : indices) mapped.push_back(indices_.at(static_cast<size_t>(index)));
  return base_->gather(mapped);
}

TrainVal split_dataset(std::shared_ptr<const Dataset> base, double val_fraction, uint64_t seed) {
  const int64_t n = base->size();
  const auto val_count = static_cast<int64_t>(std::llround(static_cast<double>(n) * val_fraction));
  if (val_count == 0) return {std::move(base), nullptr};

  auto generator = at::detail::createCPUGenerator(seed);
  const auto order = torch::randperm(n, generator, torch::kInt64);
  const int64_t* first = order.data_ptr<int64_t>();
  std::vector<int64_t> val(first, first + val_count);
  std::vector<int64_t> train(first + val_count, first + n);
  std::ranges::sort(val);
  std::ranges::sort(train);
  return {std::make_shared<Subset>(base, std::move(train)),
          std::make_shared<Subset>(base, std::move(val))};
}

}  // namespace ampt::data

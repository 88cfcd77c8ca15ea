// Train/validation subsets of one dataset, for formats that ship no validation files.
#pragma once

#include "ampt/data/dataset.h"

#include <memory>
#include <vector>

namespace ampt::data {

// The samples of `base` at `indices`, renumbered 0..indices.size()-1.
class Subset : public Dataset {
 public:
  Subset(std::shared_ptr<const Dataset> base, std::vector<int64_t> indices);

  int64_t size() const override { return static_cast<int64_t>(indices_.size()); }
  Batch gather(const std::vector<int64_t>& indices) const override;

 private:
  std::shared_ptr<const Dataset> base_;
  std::vector<int64_t> indices_;
};

struct TrainVal {
  std::shared_ptr<const Dataset> train;
  std::shared_ptr<const Dataset> val;  // null when val_fraction rounds to no samples
};

// A seeded random round(n * val_fraction) of the indices 0..n-1 for validation, the rest for
// training, each in increasing order.
struct SplitIndices {
  std::vector<int64_t> train;
  std::vector<int64_t> val;  // empty when val_fraction rounds to none
};
SplitIndices split_indices(int64_t n, double val_fraction, uint64_t seed);

// split_indices of the dataset's samples: both splits keep the base order, so sequential reading
// of a token stream stays sequential.
TrainVal split_dataset(std::shared_ptr<const Dataset> base, double val_fraction, uint64_t seed);

}  // namespace ampt::data

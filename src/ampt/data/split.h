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

// A seeded random round(size * val_fraction) samples go to validation, the rest to training; both
// keep the base order, so sequential reading of a token stream stays sequential.
TrainVal split_dataset(std::shared_ptr<const Dataset> base, double val_fraction, uint64_t seed);

}  // namespace ampt::data

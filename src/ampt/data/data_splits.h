// What opening a dataset gives: the training and validation splits, the model's view of them and
// the line that describes them; and the pieces every format builds that line from.
#pragma once

#include "ampt/config/config.h"
#include "ampt/data/dataset.h"
#include "ampt/data/document_examples.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace ampt::data {

struct DataSplits {
  DataSpec spec;
  std::shared_ptr<const Dataset> train;
  std::shared_ptr<const Dataset> val;  // null when there is none (no val files, val_fraction 0)
  std::string description;             // one line for the startup log
};

// A seeded config.val_fraction of `all` for validation, the rest for training (split.h).
DataSplits held_out(std::shared_ptr<const Dataset> all, DataSpec spec, const config::Config& config);
// The same by example, before the examples are packed into windows: --packing changes how the
// held-out examples fill windows, never which they are.
DataSplits held_out_examples(const DocumentExamples& all, DataSpec spec,
                             const config::Config& config);
// The same for any `items` (examples, preference pairs) that `select` makes a dataset of.
DataSplits held_out_items(
    int64_t items,
    const std::function<std::shared_ptr<const Dataset>(const std::vector<int64_t>&)>& select,
    DataSpec spec, const config::Config& config);

// "950", "12.3K", "1.20M", "3.40B".
std::string human_count(int64_t n);

// "train 90 / val 10 windows of 8": the sample counts that end every description.
std::string split_counts(const DataSplits& splits, std::string_view unit);

}  // namespace ampt::data

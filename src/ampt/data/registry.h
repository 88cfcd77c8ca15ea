// Turns --dataset into training and validation datasets plus what the model needs to know.
#pragma once

#include "ampt/config/config.h"
#include "ampt/data/dataset.h"
#include "ampt/data/loader.h"
#include "ampt/data/sample_request.h"

#include <memory>
#include <string>

namespace ampt::data {

struct DataSplits {
  DataSpec spec;
  std::shared_ptr<const Dataset> train;
  std::shared_ptr<const Dataset> val;  // null when there is none (no val files, val_fraction 0)
  std::string description;             // one line for the startup log
};

// Opens config.dataset for a model that consumes `request`: `synthetic` makes feature vectors,
// images or token windows as requested; text: and tokens: cut windows of request.block_size and
// check ids against request.vocab_size; mnist:, fashion-mnist: and cifar10: read files.
// Validation data comes from the format's own files (val.bin, t10k-*, test_batch.bin), else a
// seeded val_fraction of the samples. Throws UsageError for a malformed spec or token data asked
// of a model that takes no tokens, RuntimeError naming the file for bad data.
DataSplits open_dataset(const config::Config& config, const SampleRequest& request);

// Training batches: shuffled unless data_sampling is sequential, workers and prefetch from config.
LoaderOptions train_loader_options(const config::Config& config, const torch::Device& device);
// Validation batches: always in dataset order, so every evaluation sees the same batches.
LoaderOptions val_loader_options(const config::Config& config, const torch::Device& device,
                                 int64_t samples);

}  // namespace ampt::data

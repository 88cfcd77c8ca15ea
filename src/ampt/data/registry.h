// Turns --dataset into training and validation datasets plus what the model needs to know.
#pragma once

#include "ampt/config/config.h"
#include "ampt/data/data_splits.h"
#include "ampt/data/loader.h"
#include "ampt/data/sample_request.h"
#include "ampt/text/tokenize_files.h"

#include <string>

namespace ampt::data {

// Tokenizing text: input bytes done and in all (see text::InputProgress).
using TokenizeProgress = text::InputProgress;

// Opens config.dataset for a model that consumes `request`: `synthetic` makes feature vectors,
// images or token windows as requested; tokens: cuts windows of request.block_size, text: and
// jsonl: are tokenized and packed or padded (text_dataset.h), all checking ids against
// request.vocab_size; mnist:, fashion-mnist: and cifar10: read files. Validation data comes from the format's own
// files (val.bin, t10k-*, test_batch.bin), else a seeded val_fraction of the samples. `progress`
// hears of text being tokenized. Throws UsageError for a malformed spec or token data asked of a
// model that takes no tokens, RuntimeError naming the file for bad data.
DataSplits open_dataset(const config::Config& config, const SampleRequest& request,
                        const TokenizeProgress& progress = {});

// Training batches: shuffled unless data_sampling is sequential, workers and prefetch from config.
LoaderOptions train_loader_options(const config::Config& config, const torch::Device& device);
// Validation batches of `samples`, from the training options (their device and ranks) in batches
// of `batch_size` per rank: always in dataset order, so every evaluation sees the same batches,
// and the last incomplete one too (LoaderOptions::keep_last). A split smaller than one global
// batch is one batch of all its samples on every rank.
LoaderOptions val_loader_options(const LoaderOptions& training, const std::string& dataset,
                                 int64_t samples, int64_t batch_size);

// The batch_size a training split of `samples` trains with, shared out among `ranks`: batch_size,
// or when the split holds less than one global batch (batch_size x ranks), samples / ranks.
// Throws RuntimeError when the split is empty or smaller than the number of ranks.
int64_t fitted_batch_size(int64_t samples, int64_t batch_size, int64_t ranks,
                          const std::string& dataset);

}  // namespace ampt::data

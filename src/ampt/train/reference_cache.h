// --precompute_ref_logps's table, the starting model's (chosen, rejected) log-probabilities of
// every pair, kept beside the token cache: a later run of the same data from the same weights,
// computed the same way (a rerun, a resumed run), reads it instead of making another pass over
// the data. A checkpoint names the data its table was of, so that a resume onto other data is
// refused.
#pragma once

#include "ampt/data/data_splits.h"

#include <torch/nn/module.h>
#include <torch/types.h>

#include <string>

namespace ampt::train {

// What the table is of: both splits' preference pairs (data::PreferencePairs::digest), as 16 hex
// digits; empty when the splits hold no pairs.
std::string preference_data_digest(const data::DataSplits& splits);

// The weights `model` starts from, as it holds them: its parameters and buffers (placeholders
// left out) and a quantized base's storages (models/quantizable.h), as 16 hex digits.
std::string starting_weights_fingerprint(const torch::nn::Module& model);

// The table's file in `cache_dir`: ref-logps-<16 hex digits>.pt, a hash of the data's digest,
// the weights' fingerprint and `computed` (how the pass computes: device type, precision,
// kernels), so that it is found again only where all three are the same.
std::string reference_cache_path(const std::string& cache_dir, const std::string& data,
                                 const std::string& weights, const std::string& computed);

// The table in `path` ([pairs, 2] float32, on the CPU), or an undefined tensor when there is no
// file; RuntimeError naming a file that is there but not such a table.
torch::Tensor read_reference_table(const std::string& path);
// Writes `table` to `path` atomically (creating its directory).
void write_reference_table(const std::string& path, const torch::Tensor& table);

// Whether the checkpoint at `path` may resume a run whose table is of the pairs with digest
// `data`: RuntimeError, one line, when it trained against a table of other pairs (its rewards
// would be of another reference). A checkpoint without a table (a live reference) may.
void require_same_reference_data(const std::string& path, const std::string& data);

}  // namespace ampt::train

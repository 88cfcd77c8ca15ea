#include "ampt/train/reference_cache.h"

#include "ampt/checkpoint/checkpoint_reader.h"
#include "ampt/checkpoint/tensor_archive.h"
#include "ampt/core/errors.h"
#include "ampt/core/fnv1a.h"
#include "ampt/data/preference_pairs.h"
#include "ampt/models/quantizable.h"
#include "ampt/precision/placeholder.h"
#include "ampt/train/base_fingerprint.h"

#include <fmt/format.h>

#include <filesystem>

namespace ampt::train {

std::string preference_data_digest(const data::DataSplits& splits) {
  Fnv1a hash;
  bool any = false;
  for (const auto& split : {splits.train, splits.val}) {
    const auto* pairs = dynamic_cast<const data::PreferencePairs*>(split.get());
    hash.add_int(pairs != nullptr ? pairs->digest() : 0);
    any |= pairs != nullptr;
  }
  return any ? fmt::format("{:016x}", hash.digest()) : "";
}

std::string starting_weights_fingerprint(const torch::nn::Module& model) {
  NamedTensors tensors;
  for (const auto& item : model.named_parameters()) {
    if (!precision::is_placeholder(item.value())) tensors.emplace_back(item.key(), item.value());
  }
  for (const auto& item : model.named_buffers()) tensors.emplace_back(item.key(), item.value());
  for (const auto& weight : models::quantizable_weights(model)) {
    if (!weight.quantized()) continue;
    const auto stored = weight.quantized()->tensors();
    for (size_t i = 0; i < stored.size(); ++i) {
      tensors.emplace_back(fmt::format("{}.stored{}", weight.name, i), stored[i]);
    }
  }
  return base_fingerprint(tensors);
}

std::string reference_cache_path(const std::string& cache_dir, const std::string& data,
                                 const std::string& weights, const std::string& computed) {
  Fnv1a hash;
  hash.add_field("ref-logps 1").add_field(data).add_field(weights).add_field(computed);
  return (std::filesystem::path(cache_dir) / fmt::format("ref-logps-{:016x}.pt", hash.digest()))
      .string();
}

torch::Tensor read_reference_table(const std::string& path) {
  if (!std::filesystem::exists(path)) return {};
  const auto root = checkpoint::read_tensor_archive(path, "reference log-probabilities");
  if (!root.isTensor() || root.toTensor().dim() != 2 || root.toTensor().size(1) != 2 ||
      root.toTensor().scalar_type() != torch::kFloat32) {
    throw RuntimeError(fmt::format("reference log-probabilities '{}' hold no [pairs, 2] float32 "
                                   "table: delete the file and the run computes it again",
                                   path));
  }
  return root.toTensor().clone();  // not a view of the file's map
}

void write_reference_table(const std::string& path, const torch::Tensor& table) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  checkpoint::TensorArchiveWriter writer(path);
  const auto record = checkpoint::as_record(table.to(torch::kCPU).contiguous());
  writer.add(record);
  writer.finish(record);
}

void require_same_reference_data(const std::string& path, const std::string& data) {
  const auto saved = checkpoint::CheckpointReader(path).meta().reference_data;
  if (saved.empty() || saved == data) return;
  throw RuntimeError(fmt::format(
      "checkpoint '{}' trained against reference log-probabilities of other preference pairs "
      "(data {}; this run's: {}): resume with the data it trained on (the same records, "
      "max_length and packing), or start a new run",
      path, saved, data));
}

}  // namespace ampt::train

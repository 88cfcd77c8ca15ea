#include "ampt/data/data_splits.h"

#include "ampt/data/seed.h"
#include "ampt/data/split.h"

#include <fmt/format.h>

namespace ampt::data {
namespace {

// The held-out split's random stream, drawn from the one run seed (the loader's is another).
constexpr uint64_t kSplitStream = 1;

uint64_t split_seed(const config::Config& config) {
  return mix_seed(static_cast<uint64_t>(config.seed), kSplitStream);
}

}  // namespace

DataSplits held_out(std::shared_ptr<const Dataset> all, DataSpec spec, const config::Config& config) {
  auto [train, val] = split_dataset(std::move(all), config.val_fraction, split_seed(config));
  return {std::move(spec), std::move(train), std::move(val), ""};
}

DataSplits held_out_examples(const DocumentExamples& all, DataSpec spec,
                             const config::Config& config) {
  return held_out_items(
      all.counts().examples,
      [&](const std::vector<int64_t>& examples) { return all.select(examples); }, std::move(spec),
      config);
}

DataSplits held_out_items(
    int64_t items,
    const std::function<std::shared_ptr<const Dataset>(const std::vector<int64_t>&)>& select,
    DataSpec spec, const config::Config& config) {
  const auto split = split_indices(items, config.val_fraction, split_seed(config));
  return {std::move(spec), select(split.train), split.val.empty() ? nullptr : select(split.val), ""};
}

std::string human_count(int64_t n) {
  if (n >= 1'000'000'000) return fmt::format("{:.2f}B", static_cast<double>(n) / 1e9);
  if (n >= 1'000'000) return fmt::format("{:.2f}M", static_cast<double>(n) / 1e6);
  if (n >= 10'000) return fmt::format("{:.1f}K", static_cast<double>(n) / 1e3);
  return std::to_string(n);
}

std::string split_counts(const DataSplits& splits, std::string_view unit) {
  return fmt::format("train {} / val {} {}", human_count(splits.train->size()),
                     splits.val ? human_count(splits.val->size()) : "none", unit);
}

}  // namespace ampt::data

#include "ampt/data/data_splits.h"

#include "ampt/data/seed.h"
#include "ampt/data/split.h"

#include <fmt/format.h>

namespace ampt::data {
namespace {

// The held-out split's random stream, drawn from the one run seed (the loader's is another).
constexpr uint64_t kSplitStream = 1;

}  // namespace

DataSplits held_out(std::shared_ptr<const Dataset> all, DataSpec spec, const config::Config& config) {
  auto [train, val] = split_dataset(std::move(all), config.val_fraction,
                                    mix_seed(static_cast<uint64_t>(config.seed), kSplitStream));
  return {std::move(spec), std::move(train), std::move(val), ""};
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

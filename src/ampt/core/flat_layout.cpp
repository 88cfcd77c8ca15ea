#include "ampt/core/flat_layout.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>

namespace ampt {

int64_t FlatUnit::numel() const { return std::accumulate(numels.begin(), numels.end(), int64_t{0}); }

FlatLayout::FlatLayout(std::vector<FlatUnit> units, int64_t world_size)
    : units_(std::move(units)), world_size_(world_size) {
  if (world_size_ < 1) throw std::invalid_argument("FlatLayout: world size below 1");
  for (size_t u = 0; u < units_.size(); ++u) {
    const auto& unit = units_[u];
    if (unit.params.size() != unit.numels.size()) {
      throw std::invalid_argument("FlatLayout: a unit's params and numels differ in length");
    }
    unit_shard_offset_.push_back(shard_numel_);
    unit_shard_numel_.push_back((unit.numel() + world_size_ - 1) / world_size_);
    shard_numel_ += unit_shard_numel_.back();
    int64_t offset = 0;
    for (size_t k = 0; k < unit.params.size(); ++k) {
      const auto p = static_cast<size_t>(unit.params[k]);
      if (p >= unit_of_.size()) {
        unit_of_.resize(p + 1, -1);
        offset_of_.resize(p + 1, 0);
      }
      if (unit_of_[p] >= 0) throw std::invalid_argument("FlatLayout: a parameter in two places");
      unit_of_[p] = static_cast<int64_t>(u);
      offset_of_[p] = offset;
      offset += unit.numels[k];
    }
  }
}

int64_t FlatLayout::numel() const {
  int64_t total = 0;
  for (const auto& unit : units_) total += unit.numel();
  return total;
}

int64_t FlatLayout::max_unit_padded() const {
  int64_t most = 0;
  for (const auto s : unit_shard_numel_) most = std::max(most, s * world_size_);
  return most;
}

std::vector<ShardPiece> FlatLayout::segments(int64_t rank) const {
  std::vector<ShardPiece> out;
  for (size_t u = 0; u < units_.size(); ++u) {
    const auto& unit = units_[u];
    const int64_t lo = rank * unit_shard_numel_[u];
    const int64_t hi = lo + unit_shard_numel_[u];
    int64_t offset = 0;
    for (size_t k = 0; k < unit.params.size(); ++k) {
      const int64_t start = std::max(lo, offset);
      const int64_t end = std::min(hi, offset + unit.numels[k]);
      if (start < end) {
        out.push_back({rank, unit.params[k], start - offset, end - start,
                       unit_shard_offset_[u] + start - lo});
      }
      offset += unit.numels[k];
    }
  }
  return out;
}

std::vector<ShardPiece> FlatLayout::locate(int64_t param, int64_t begin, int64_t count) const {
  const auto p = static_cast<size_t>(param);
  if (param < 0 || p >= unit_of_.size() || unit_of_[p] < 0) {
    throw std::invalid_argument("FlatLayout: no such parameter");
  }
  const auto u = static_cast<size_t>(unit_of_[p]);
  const int64_t slice = unit_shard_numel_[u];
  std::vector<ShardPiece> out;
  for (int64_t at = offset_of_[p] + begin, end = at + count; at < end;) {
    const int64_t rank = at / slice;
    const int64_t take = std::min(end, (rank + 1) * slice) - at;
    out.push_back({rank, param, at - offset_of_[p], take,
                   unit_shard_offset_[u] + at - rank * slice});
    at += take;
  }
  return out;
}

}  // namespace ampt

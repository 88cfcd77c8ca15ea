// How ZeRO lays parameters out flat and cuts them into one shard per rank: FSDP's flat
// parameters, with the gradient buckets as the units. Plain integers, so that the training step,
// the checkpoint writer and a loader re-cutting shards for another world size compute the same
// pieces.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ampt {

// Parameters laid end to end (each flattened in its logical element order).
struct FlatUnit {
  std::vector<int64_t> params;  // indices into the run's parameter list, in flat order
  std::vector<int64_t> numels;  // each one's element count
  int64_t numel() const;        // padding excluded
};

// `count` elements of parameter `param`, from its element `begin`, stored at `shard_offset` of
// rank `rank`'s shard.
struct ShardPiece {
  int64_t rank = 0;
  int64_t param = 0;
  int64_t begin = 0;
  int64_t count = 0;
  int64_t shard_offset = 0;
};

// Every unit is padded to a multiple of the world size and rank r owns its r-th contiguous
// 1/world_size slice, wherever parameter boundaries fall; a rank's shard is its slices of all
// units, in unit order. A bucket's reduce-scatter then leaves each rank exactly its slice of the
// bucket, an all-gather of a unit rebuilds the unit (stage 3 would gather unit by unit before
// its forward), and the flat order of a parameter's elements does not depend on the world size,
// which is what lets a checkpoint's shards be re-cut for another one.
class FlatLayout {
 public:
  FlatLayout() = default;
  FlatLayout(std::vector<FlatUnit> units, int64_t world_size);

  int64_t world_size() const { return world_size_; }
  const std::vector<FlatUnit>& units() const { return units_; }
  // Elements of unit u each rank holds: its padded size / world size.
  int64_t unit_shard_numel(std::size_t unit) const { return unit_shard_numel_[unit]; }
  // Where unit u's slice starts in every rank's shard.
  int64_t unit_shard_offset(std::size_t unit) const { return unit_shard_offset_[unit]; }
  // Elements of one rank's shard, padding included.
  int64_t shard_numel() const { return shard_numel_; }
  // Elements of every parameter (padding excluded), and of the largest unit padded.
  int64_t numel() const;
  int64_t max_unit_padded() const;

  // Rank `rank`'s shard as pieces of parameters, in shard order (padding left out).
  std::vector<ShardPiece> segments(int64_t rank) const;
  // Where elements [begin, begin + count) of `param` are stored, in element order.
  std::vector<ShardPiece> locate(int64_t param, int64_t begin, int64_t count) const;

 private:
  std::vector<FlatUnit> units_;
  int64_t world_size_ = 1;
  std::vector<int64_t> unit_shard_numel_;
  std::vector<int64_t> unit_shard_offset_;
  int64_t shard_numel_ = 0;
  // param -> (unit, offset in the unit); -1 for parameters the layout lacks
  std::vector<int64_t> unit_of_;
  std::vector<int64_t> offset_of_;
};

}  // namespace ampt

// ZeRO's flat layout: units padded to the world size, rank r's slice of each, and the pieces a
// loader reads when it re-cuts shards for another world size.
#include "ampt/core/flat_layout.h"

#include <catch2/catch.hpp>

#include <map>
#include <tuple>

using ampt::FlatLayout;
using ampt::FlatUnit;
using ampt::ShardPiece;

namespace {

// Parameter 2 (5 elements) and 0 (3) in one unit, parameter 1 (3) in another.
std::vector<FlatUnit> example_units() { return {{{2, 0}, {5, 3}}, {{1}, {3}}}; }

auto as_tuple(const ShardPiece& p) { return std::make_tuple(p.rank, p.param, p.begin, p.count, p.shard_offset); }

}  // namespace

TEST_CASE("flat layout: each rank owns a contiguous slice of every padded unit", "[core][zero]") {
  const FlatLayout layout(example_units(), 3);
  // Unit 0 (8 elements) pads to 9: slices of 3; unit 1 (3) needs no padding: slices of 1.
  CHECK(layout.unit_shard_numel(0) == 3);
  CHECK(layout.unit_shard_numel(1) == 1);
  CHECK(layout.unit_shard_offset(1) == 3);
  CHECK(layout.shard_numel() == 4);
  CHECK(layout.numel() == 11);
  CHECK(layout.max_unit_padded() == 9);
  using T = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>;
  auto tuples = [&](int64_t rank) {
    std::vector<T> out;
    for (const auto& p : layout.segments(rank)) out.push_back(as_tuple(p));
    return out;
  };
  // (rank, param, begin, count, shard offset), worked out by hand.
  CHECK(tuples(0) == std::vector<T>{{0, 2, 0, 3, 0}, {0, 1, 0, 1, 3}});
  CHECK(tuples(1) == std::vector<T>{{1, 2, 3, 2, 0}, {1, 0, 0, 1, 2}, {1, 1, 1, 1, 3}});
  // Element 8 of unit 0 is padding: rank 2's slice holds two real elements of it.
  CHECK(tuples(2) == std::vector<T>{{2, 0, 1, 2, 0}, {2, 1, 2, 1, 3}});
  std::vector<T> found;
  for (const auto& p : layout.locate(0, 0, 3)) found.push_back(as_tuple(p));
  CHECK(found == std::vector<T>{{1, 0, 0, 1, 2}, {2, 0, 1, 2, 0}});
}

TEST_CASE("flat layout: segments tile every parameter once and locate finds them", "[core][zero]") {
  const std::vector<FlatUnit> units{{{0, 3, 1}, {7, 1, 12}}, {{2}, {5}}, {{4, 5}, {2, 9}}};
  const std::vector<int64_t> numels{7, 12, 5, 1, 2, 9};
  for (int64_t world = 1; world <= 6; ++world) {
    INFO("world size " << world);
    const FlatLayout layout(units, world);
    std::map<std::pair<int64_t, int64_t>, std::pair<int64_t, int64_t>> stored;  // (param, element) -> (rank, offset)
    for (int64_t rank = 0; rank < world; ++rank) {
      int64_t last_end = 0;
      for (const auto& s : layout.segments(rank)) {
        CHECK(s.shard_offset >= last_end);  // shard order, no overlap
        last_end = s.shard_offset + s.count;
        CHECK(last_end <= layout.shard_numel());
        for (int64_t e = 0; e < s.count; ++e) {
          CHECK(stored.emplace(std::pair{s.param, s.begin + e}, std::pair{rank, s.shard_offset + e}).second);
        }
      }
    }
    for (int64_t p = 0; p < 6; ++p) {
      for (int64_t e = 0; e < numels[p]; ++e) REQUIRE(stored.count({p, e}) == 1);
      int64_t next = 1;  // a range starting past element 0
      for (const auto& piece : layout.locate(p, 1, numels[p] - 1)) {
        CHECK(piece.begin == next);
        for (int64_t e = 0; e < piece.count; ++e) {
          CHECK(stored.at({p, piece.begin + e}) == std::pair{piece.rank, piece.shard_offset + e});
        }
        next += piece.count;
      }
      CHECK(next == numels[p]);
    }
  }
}

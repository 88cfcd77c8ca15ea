// Piece → token ids, so the BPE merges of a word are worked out once: natural text repeats its
// words, and a hit costs one hash of the piece. One cache per thread; it empties itself when full.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ampt::text {

class WordCache {
 public:
  // Pieces longer than this are merged every time: they are rare and would crowd the arena.
  static constexpr std::size_t kMaxPieceBytes = 128;

  WordCache();

  // The cached ids of `piece`, or an empty span.
  std::span<const int32_t> find(std::string_view piece) const;
  // Caches the ids of a piece that find() did not know.
  void insert(std::string_view piece, std::span<const int32_t> ids);
  void clear();

 private:
  struct Slot {
    uint64_t hash = 0;
    uint32_t key_offset = 0;
    uint32_t key_length = 0;  // 0: empty
    uint32_t ids_offset = 0;
    uint32_t ids_count = 0;
  };
  static uint64_t hash(std::string_view piece);
  std::size_t probe(std::string_view piece, uint64_t h) const;  // its slot, or the empty one
  void grow();

  std::vector<Slot> slots_;
  std::string keys_;
  std::vector<int32_t> ids_;
  std::size_t used_ = 0;
};

}  // namespace ampt::text

// Byte-level BPE: a piece's bytes start as single-byte tokens and the adjacent pair of lowest
// rank is merged until none is left, leftmost first among equal ranks (as tiktoken and Hugging
// Face tokenizers do), in O(n log n) for a piece of n bytes. SentencePiece's BPE starts from
// characters instead, each its token or, without one, its bytes' <0xXX> tokens: here the bytes
// of a character that has a token merge into it first, ahead of every real merge.
#pragma once

#include "ampt/text/vocabulary.h"

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

namespace ampt::text {

// Reused buffers, so merging a piece allocates nothing once they have grown.
struct MergeScratch {
  struct Candidate {
    int32_t rank;
    int32_t pos;
    int32_t left;
    int32_t right;
    int32_t result;
  };
  std::vector<int32_t> ids;
  std::vector<int32_t> prev;
  std::vector<int32_t> next;
  std::vector<Candidate> heap;
};

class BpeModel {
 public:
  // Throws RuntimeError naming vocabulary.source when a byte has no token or a merge names an
  // id outside the vocabulary.
  explicit BpeModel(const Vocabulary& vocabulary);

  // Appends the ids of `piece` (not empty) to `out`.
  void encode_piece(std::string_view piece, std::vector<int32_t>& out, MergeScratch& scratch) const;

 private:
  struct Found {
    int32_t rank;
    int32_t result;
  };
  Found find(int32_t left, int32_t right) const;  // rank -1 when the pair never merges
  void add(const Merge& merge);
  // With byte fallback: the merges that put each multi-byte character with a token together
  // from its bytes (ranks 0 to 2), through ids past the vocabulary for its first bytes.
  std::vector<Merge> assemble_characters(const Vocabulary& vocabulary);
  // The vocabulary's ranks start after the characters' merges.
  static constexpr int32_t kAssemblyRanks = 3;

  int32_t vocab_size_ = 0;
  // Ids from vocab_size_ on: a character's first bytes, as their byte tokens.
  std::vector<std::vector<int32_t>> expansions_;
  std::array<int32_t, 256> byte_ids_{};
  // Open addressing, keyed by (left << 32 | right); rank and result packed in the value.
  std::vector<uint64_t> keys_;
  std::vector<uint64_t> values_;
  uint64_t mask_ = 0;
};

}  // namespace ampt::text

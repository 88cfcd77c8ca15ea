// What a tokenizer file holds once read, whatever its format: every token's bytes, the merges
// BPE may apply, and the special tokens. Loaders produce it; Tokenizer checks and uses it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ampt::text {

struct Merge {
  int32_t left = 0;    // token ids of the adjacent pair
  int32_t right = 0;
  int32_t rank = 0;    // lower merges first
  int32_t result = 0;  // the id of the pair's concatenation
};

struct Vocabulary {
  std::string source;               // the file(s) it came from, for errors
  std::vector<std::string> tokens;  // id → bytes, ids 0..size-1
  std::vector<Merge> merges;
  std::vector<int32_t> special_ids;  // matched as whole strings before BPE when allowed
};

}  // namespace ampt::text

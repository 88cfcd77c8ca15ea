// Language-model samples cut from runs of tokens: a window of block_size + 1 tokens gives the
// inputs (its first block_size tokens) and the targets (the same window shifted by one).
#pragma once

#include "ampt/data/dataset.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace ampt::data {

// One contiguous run of tokens in memory: a mapped shard, a text file's bytes, or generated data.
// Windows never cross from one span into the next (shards need not continue each other).
struct TokenSpan {
  std::string name;                   // the file it came from, for errors
  std::shared_ptr<const void> owner;  // keeps `data` alive: a MappedFile or a vector
  const void* data = nullptr;
  int64_t count = 0;                  // tokens
  int bytes_per_token = 2;            // 1 (text bytes), 2 (uint16 token ids) or 4 (uint32 ids)
};

// Calls `f` with a typed pointer to the span's token `first` (const uint8_t*, const uint16_t* or
// const uint32_t*, by bytes_per_token) and returns what it returns: one generic lambda reads
// every width of token.
template <class F>
decltype(auto) with_tokens(const TokenSpan& span, F&& f, int64_t first = 0) {
  switch (span.bytes_per_token) {
    case 1: return f(static_cast<const uint8_t*>(span.data) + first);
    case 2: return f(static_cast<const uint16_t*>(span.data) + first);
    case 4: return f(static_cast<const uint32_t*>(span.data) + first);
    default: throw std::logic_error(span.name + ": tokens of " +
                                    std::to_string(span.bytes_per_token) + " bytes");
  }
}

// The largest token id in the span, read at memory speed (used to check ids against the vocab).
int64_t max_token(const TokenSpan& span);

class TokenWindows : public Dataset {
 public:
  // Windows start every block_size tokens, so consecutive windows share only the one token that
  // is the last target of one and the first input of the next. Throws RuntimeError naming the
  // span whose largest id is >= vocab_size, or the data when no span holds a whole window.
  // With a `document_separator` (<|endoftext|>, --document_mask) the batches carry positions
  // that restart after each one: documents in a window do not attend to each other.
  TokenWindows(std::vector<TokenSpan> spans, int64_t block_size, int64_t vocab_size,
               std::optional<int32_t> document_separator = std::nullopt);

  int64_t size() const override { return first_window_.back(); }
  Batch gather(const std::vector<int64_t>& indices) const override;
  int64_t tokens() const;

 private:
  std::vector<TokenSpan> spans_;
  std::vector<int64_t> first_window_;  // index of each span's first window, then the total
  int64_t block_size_;
  std::optional<int32_t> document_separator_;
};

}  // namespace ampt::data

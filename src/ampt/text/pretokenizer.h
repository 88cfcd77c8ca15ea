// GPT-2's pre-tokenizer: splits text into the pieces that BPE encodes one by one, matching
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// (tiktoken's r50k/gpt2 pattern) by hand: no regex engine, no allocation.
#pragma once

#include <cstddef>
#include <string_view>

namespace ampt::text {

// The end of the piece starting at `begin` (begin < text.size()). `text` must be well-formed
// UTF-8 (see utf8.h); the end of `text` counts as the end of the input for `(?!\S)`.
std::size_t piece_end(std::string_view text, std::size_t begin);

// Whether text[0, pos) and text[pos, end) split into the same pieces as text does, whatever
// comes before or after: the character before `pos` is not whitespace nor an apostrophe, and its
// class (letter, number, other) differs from that of the character at `pos`. Parallel encoding
// cuts only there. 0 < pos < text.size(), both characters well-formed.
bool is_safe_cut(std::string_view text, std::size_t pos);

}  // namespace ampt::text

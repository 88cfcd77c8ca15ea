// The pre-tokenizers: split text into the pieces that BPE encodes one by one, matching the
// regexes below (tiktoken's and tokenizer.json's spelling) by hand: no regex engine, no
// allocation. Alternation is ordered: at each position the first alternative that matches wins.
//   gpt2:   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   llama3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//   qwen2:  llama3's with \p{N} for \p{N}{1,3}
//   sentencepiece: no regex: a run of "▁" and what follows up to the next "▁" (▁*[^▁]*)
#pragma once

#include "ampt/text/vocabulary.h"

#include <cstddef>
#include <optional>
#include <string_view>

namespace ampt::text {

// SentencePiece's space, "▁" (U+2581), as its vocabularies and their tokenizer.json write it.
inline constexpr std::string_view kMetaspace = "\xE2\x96\x81";

// The end of the piece starting at `begin` (begin < text.size()). `text` must be well-formed
// UTF-8 (see utf8.h); the end of `text` counts as the end of the input for `(?!\S)`.
std::size_t piece_end(PreTokenizer pattern, std::string_view text, std::size_t begin);

// Whether text[0, pos) and text[pos, end) split into the same pieces as text does, whatever
// comes before or after: no piece can reach across `pos`, nor end elsewhere for not seeing past
// it. Parallel encoding cuts only there. 0 < pos < text.size(), both characters well-formed.
//   gpt2: the character before `pos` is not whitespace nor an apostrophe, and its class
//     (letter, number, other) differs from that of the character at `pos`;
//   llama3, qwen2: before `pos` a letter and at it no letter, or a number and no number, or
//     other (punctuation, symbols, marks) and a number or whitespace other than \r and \n
//     (" ?[^\s\p{L}\p{N}]+[\r\n]*" takes newlines along, "[^\r\n\p{L}\p{N}]?\p{L}+" a letter).
//   sentencepiece: a "▁" or space at `pos` and neither before it (raw or normalized text).
bool is_safe_cut(PreTokenizer pattern, std::string_view text, std::size_t pos);

// The regex `pattern` implements, as written above.
std::string_view pattern_regex(PreTokenizer pattern);
// The pre-tokenizer whose regex is exactly `regex` (sentencepiece has none); nullopt for any
// other.
std::optional<PreTokenizer> pre_tokenizer_of_regex(std::string_view regex);
// "GPT-2", "Llama-3", "Qwen2", "SentencePiece": for messages and summaries.
std::string_view pre_tokenizer_name(PreTokenizer pattern);

}  // namespace ampt::text

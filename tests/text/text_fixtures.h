// Shared by the tokenizer tests: GPT-2's fetched ranks, a toy vocabulary, and the pre-tokenizer's
// pieces of a text.
#pragma once

#include "ampt/text/pretokenizer.h"
#include "ampt/text/vocabulary.h"

#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ampt::test {

// scripts/bootstrap.sh fetches GPT-2's ranks (from openai-whisper's source distribution) here.
inline std::string gpt2_ranks_path() { return AMPT_SOURCE_DIR "/.deps/gpt2.tiktoken"; }

inline bool have_gpt2_ranks() { return std::filesystem::exists(gpt2_ranks_path()); }

// The 256 byte tokens (id = byte), then one token per merge in order, and <|endoftext|> last.
inline text::Vocabulary toy_vocabulary(const std::vector<std::pair<std::string, std::string>>& merges) {
  text::Vocabulary v;
  v.source = "toy";
  for (int b = 0; b < 256; ++b) v.tokens.emplace_back(1, static_cast<char>(b));
  const auto id_of = [&](const std::string& bytes) {
    for (std::size_t id = 0; id < v.tokens.size(); ++id) {
      if (v.tokens[id] == bytes) return static_cast<int32_t>(id);
    }
    throw std::logic_error("toy merge of an unknown token " + bytes);
  };
  for (const auto& [left, right] : merges) {
    const auto rank = static_cast<int32_t>(v.merges.size());
    v.merges.push_back({id_of(left), id_of(right), rank, static_cast<int32_t>(v.tokens.size())});
    v.tokens.push_back(left + right);
  }
  v.special_ids.push_back(static_cast<int32_t>(v.tokens.size()));
  v.tokens.emplace_back("<|endoftext|>");
  return v;
}

// Merges for common English pairs, enough to make BPE do real work in property tests.
inline text::Vocabulary english_toy_vocabulary() {
  return toy_vocabulary({{"t", "h"}, {"th", "e"}, {" ", "the"}, {"i", "n"}, {"in", "g"}, {"e", "r"},
                         {" ", "a"}, {"a", "n"}, {"an", "d"}, {" ", "and"}, {"o", "n"}, {" ", "t"},
                         {"e", "s"}, {"es", "t"}, {" ", "s"}, {"0", "0"}, {"00", "0"}, {" ", " "},
                         {"  ", "  "}, {"\n", "\n"}, {"\xC3", "\xA9"}, {"\xE4", "\xB8"}});
}

inline std::vector<std::string> pieces(std::string_view text) {
  std::vector<std::string> out;
  for (std::size_t pos = 0; pos < text.size();) {
    const std::size_t end = text::piece_end(text, pos);
    out.emplace_back(text.substr(pos, end - pos));
    pos = end;
  }
  return out;
}

}  // namespace ampt::test

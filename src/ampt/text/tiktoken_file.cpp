#include "ampt/text/tiktoken_file.h"

#include "ampt/core/errors.h"
#include "ampt/text/read_file.h"

#include <fmt/format.h>

#include <charconv>
#include <optional>
#include <unordered_map>

namespace ampt::text {
namespace {

int base64_digit(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// Standard base64 with '=' padding; nullopt when malformed.
std::optional<std::string> base64_decode(std::string_view text) {
  if (text.empty() || text.size() % 4 != 0) return std::nullopt;
  std::size_t padding = 0;
  while (padding < 2 && text[text.size() - 1 - padding] == '=') ++padding;
  std::string out;
  uint32_t bits = 0;
  int count = 0;
  for (std::size_t i = 0; i < text.size() - padding; ++i) {
    const int digit = base64_digit(text[i]);
    if (digit < 0) return std::nullopt;
    bits = (bits << 6) | static_cast<uint32_t>(digit);
    count += 6;
    if (count >= 8) {
      count -= 8;
      out += static_cast<char>((bits >> count) & 0xFF);
    }
  }
  return out;
}

constexpr std::size_t kGpt2FamilyMaxRanks = 50281;
constexpr std::size_t kQwenRanks = 151643;
constexpr int kQwenExtraTokens = 205;

// The pattern and special tokens of the encoding with this many ranks (see the header).
void add_encoding(const std::string& path, Vocabulary& vocabulary) {
  const std::size_t ranks = vocabulary.tokens.size();
  std::vector<std::string> specials;
  if (ranks <= kGpt2FamilyMaxRanks) {
    specials = {"<|endoftext|>"};
  } else if (ranks == kQwenRanks) {
    vocabulary.pre_tokenizer = PreTokenizer::qwen2;
    specials = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
    for (int i = 0; i < kQwenExtraTokens; ++i) specials.push_back(fmt::format("<|extra_{}|>", i));
  } else {
    throw RuntimeError(fmt::format(
        "{}: {} ranks is no encoding ampt knows the pattern and special tokens of: it reads "
        "GPT-2's family (gpt2, r50k_base, p50k_base: at most {} ranks) and Qwen's qwen.tiktoken "
        "({} ranks), not cl100k_base, o200k_base or others",
        path, ranks, kGpt2FamilyMaxRanks, kQwenRanks));
  }
  for (std::string& special : specials) {
    vocabulary.special_ids.push_back(static_cast<int32_t>(vocabulary.tokens.size()));
    vocabulary.tokens.push_back(std::move(special));
  }
  vocabulary.ignore_merges = true;
}

}  // namespace

Vocabulary read_tiktoken(const std::string& path) {
  const std::string text = read_text_file(path);
  Vocabulary vocabulary;
  vocabulary.source = path;
  auto& tokens = vocabulary.tokens;
  std::unordered_map<std::string, int32_t> rank_of;
  std::vector<bool> given;
  for_each_line(text, [&](std::string_view line, std::size_t line_number) {
    if (line.empty()) return;
    const auto fail = [&](std::string_view what) {
      throw RuntimeError(fmt::format("{}: line {}: {}", path, line_number, what));
    };
    const std::size_t space = line.find(' ');
    if (space == std::string_view::npos) fail("expected \"base64-token rank\", found no space");
    const std::string_view digits = line.substr(space + 1);
    int32_t rank = -1;
    const auto [rank_end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), rank);
    if (error != std::errc() || rank_end != digits.data() + digits.size() || rank < 0 || rank >= 1 << 30) {
      fail(fmt::format("rank \"{}\" is not a whole number >= 0", digits));
    }
    const auto bytes = base64_decode(line.substr(0, space));
    if (!bytes) fail(fmt::format("\"{}\" is not base64", line.substr(0, space)));
    if (!rank_of.emplace(*bytes, rank).second) fail("the same token is given twice");
    if (static_cast<std::size_t>(rank) >= tokens.size()) {
      tokens.resize(rank + 1);
      given.resize(rank + 1, false);
    }
    if (given[rank]) fail(fmt::format("rank {} is given twice", rank));
    given[rank] = true;
    tokens[rank] = *bytes;
  });
  if (tokens.empty()) throw RuntimeError(fmt::format("{}: no tokens", path));
  for (std::size_t rank = 0; rank < given.size(); ++rank) {
    if (!given[rank]) {
      throw RuntimeError(fmt::format("{}: ranks must be 0..{} without gaps: {} is missing", path,
                                     given.size() - 1, rank));
    }
  }
  // Every split of a token into two tokens merges into it.
  for (int32_t rank = 0; rank < static_cast<int32_t>(tokens.size()); ++rank) {
    const std::string& token = tokens[rank];
    for (std::size_t split = 1; split < token.size(); ++split) {
      const auto left = rank_of.find(token.substr(0, split));
      const auto right = rank_of.find(token.substr(split));
      if (left != rank_of.end() && right != rank_of.end()) {
        vocabulary.merges.push_back({left->second, right->second, rank, rank});
      }
    }
  }
  add_encoding(path, vocabulary);
  return vocabulary;
}

}  // namespace ampt::text

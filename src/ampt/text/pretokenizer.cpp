#include "ampt/text/pretokenizer.h"

#include "ampt/text/unicode_class.h"

#include <array>

namespace ampt::text {
namespace {

constexpr std::string_view kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Not a regex any tokenizer.json spells: what the cut before each word's "▁" amounts to.
constexpr std::string_view kSentencePieceRegex = "▁*[^▁]*";

struct Known {
  PreTokenizer pattern;
  std::string_view regex;
  std::string_view name;
};
constexpr std::array<Known, 4> kKnown = {
    {{PreTokenizer::gpt2, kGpt2Regex, "GPT-2"},
     {PreTokenizer::llama3, kLlama3Regex, "Llama-3"},
     {PreTokenizer::qwen2, kQwen2Regex, "Qwen2"},
     {PreTokenizer::sentencepiece, kSentencePieceRegex, "SentencePiece"}}};

const Known& known(PreTokenizer pattern) { return kKnown[static_cast<std::size_t>(pattern)]; }

bool is_newline(char c) { return c == '\r' || c == '\n'; }

std::size_t run_end(std::string_view text, std::size_t pos, CodeClass run_class) {
  while (pos < text.size()) {
    const ClassifiedChar c = classify_at(text, pos);
    if (c.code_class != run_class) break;
    pos += c.length;
  }
  return pos;
}

// 's 't 're 've 'm 'll 'd: the length of the contraction at `begin`, or 0. `ignore_case` is
// (?i:...) as both regex engines apply it, simple case folding: 'S, 'Ll, and 'ſ (U+017F, long s,
// folds to s).
std::size_t contraction_length(std::string_view text, std::size_t begin, bool ignore_case) {
  if (text[begin] != '\'' || begin + 1 >= text.size()) return 0;
  const auto at = [&](std::size_t i) {
    const char c = text[i];
    return ignore_case && c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
  };
  const char next = at(begin + 1);
  if (next == 's' || next == 't' || next == 'm' || next == 'd') return 2;
  if (ignore_case && text.substr(begin + 1, 2) == "\xC5\xBF") return 3;
  if (begin + 2 >= text.size()) return 0;
  const char third = at(begin + 2);
  return ((next == 'r' || next == 'v') && third == 'e') || (next == 'l' && third == 'l') ? 3 : 0;
}

// "\s+(?!\S)|\s+" at whitespace: to the end of the text, or up to its last character before a
// non-space (which then starts the next piece, " word" say), or a single whitespace character.
// With `newlines`, "\s*[\r\n]+" first: through the run's last \r or \n.
std::size_t whitespace_end(std::string_view text, std::size_t begin, bool newlines) {
  std::size_t last = begin;
  std::size_t after_newline = begin;
  std::size_t pos = begin;
  while (pos < text.size()) {
    const ClassifiedChar c = classify_at(text, pos);
    if (c.code_class != CodeClass::space) break;
    if (is_newline(text[pos])) after_newline = pos + 1;
    last = pos;
    pos += c.length;
  }
  if (newlines && after_newline > begin) return after_newline;
  if (pos == text.size()) return pos;
  return last > begin ? last : pos;
}

std::size_t gpt2_piece_end(std::string_view text, std::size_t begin) {
  if (const std::size_t n = contraction_length(text, begin, false); n != 0) return begin + n;
  // " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+": an optional space, then a run of one class.
  if (text[begin] == ' ' && begin + 1 < text.size()) {
    const ClassifiedChar next = classify_at(text, begin + 1);
    if (next.code_class != CodeClass::space) {
      return run_end(text, begin + 1 + next.length, next.code_class);
    }
  }
  const ClassifiedChar first = classify_at(text, begin);
  if (first.code_class != CodeClass::space) {
    return run_end(text, begin + first.length, first.code_class);
  }
  return whitespace_end(text, begin, false);
}

// Llama-3's and Qwen2's pattern; `max_digits` is 3 or 1.
std::size_t split_piece_end(std::string_view text, std::size_t begin, int max_digits) {
  if (const std::size_t n = contraction_length(text, begin, true); n != 0) return begin + n;
  const ClassifiedChar first = classify_at(text, begin);
  const std::size_t second = begin + first.length;
  // "[^\r\n\p{L}\p{N}]?\p{L}+": a letter run, with one leading character that is none of those.
  if (first.code_class == CodeClass::letter) return run_end(text, second, CodeClass::letter);
  const bool may_lead = first.code_class != CodeClass::number && !is_newline(text[begin]);
  const CodeClass next = second < text.size() ? classify_at(text, second).code_class : CodeClass::space;
  if (may_lead && next == CodeClass::letter) return run_end(text, second, CodeClass::letter);
  if (first.code_class == CodeClass::number) {
    std::size_t pos = second;
    for (int digits = 1; digits < max_digits && pos < text.size(); ++digits) {
      const ClassifiedChar c = classify_at(text, pos);
      if (c.code_class != CodeClass::number) break;
      pos += c.length;
    }
    return pos;
  }
  // " ?[^\s\p{L}\p{N}]+[\r\n]*"
  if (first.code_class == CodeClass::other || (text[begin] == ' ' && next == CodeClass::other)) {
    std::size_t pos = run_end(text, first.code_class == CodeClass::other ? begin : second, CodeClass::other);
    while (pos < text.size() && is_newline(text[pos])) ++pos;
    return pos;
  }
  return whitespace_end(text, begin, true);
}

std::size_t char_start(std::string_view text, std::size_t pos) {
  while (pos > 0 && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) --pos;
  return pos;
}

bool gpt2_safe_cut(std::string_view text, std::size_t pos) {
  const std::size_t before = char_start(text, pos - 1);
  if (text[before] == '\'') return false;
  const CodeClass left = classify_at(text, before).code_class;
  return left != CodeClass::space && left != classify_at(text, pos).code_class;
}

bool split_safe_cut(std::string_view text, std::size_t pos) {
  const CodeClass left = classify_at(text, char_start(text, pos - 1)).code_class;
  const CodeClass right = classify_at(text, pos).code_class;
  switch (left) {
    case CodeClass::letter: return right != CodeClass::letter;
    case CodeClass::number: return right != CodeClass::number;
    case CodeClass::other:
      return right == CodeClass::number || (right == CodeClass::space && !is_newline(text[pos]));
    case CodeClass::space: return false;
  }
  return false;
}

bool metaspace_at(std::string_view text, std::size_t pos) {
  return text.substr(pos).starts_with(kMetaspace);
}

// A run of "▁" and what follows up to the next "▁": SentencePiece's word (split_by_whitespace,
// whitespace-only pieces allowed), which no token of its vocabulary reaches across.
std::size_t sentencepiece_piece_end(std::string_view text, std::size_t begin) {
  std::size_t pos = begin;
  while (metaspace_at(text, pos)) pos += kMetaspace.size();
  const std::size_t next = text.find(kMetaspace, pos);
  return next == std::string_view::npos ? text.size() : next;
}

// On raw text too, where a space becomes "▁" only later.
bool sentencepiece_safe_cut(std::string_view text, std::size_t pos) {
  const auto space_at = [&](std::size_t at) { return text[at] == ' ' || metaspace_at(text, at); };
  const bool space_before = text[pos - 1] == ' ' || (pos >= kMetaspace.size() &&
                                                     metaspace_at(text, pos - kMetaspace.size()));
  return space_at(pos) && !space_before;
}

}  // namespace

std::size_t piece_end(PreTokenizer pattern, std::string_view text, std::size_t begin) {
  switch (pattern) {
    case PreTokenizer::gpt2: return gpt2_piece_end(text, begin);
    case PreTokenizer::llama3: return split_piece_end(text, begin, 3);
    case PreTokenizer::qwen2: return split_piece_end(text, begin, 1);
    case PreTokenizer::sentencepiece: return sentencepiece_piece_end(text, begin);
  }
  return text.size();
}

bool is_safe_cut(PreTokenizer pattern, std::string_view text, std::size_t pos) {
  switch (pattern) {
    case PreTokenizer::gpt2: return gpt2_safe_cut(text, pos);
    case PreTokenizer::sentencepiece: return sentencepiece_safe_cut(text, pos);
    default: return split_safe_cut(text, pos);
  }
}

std::string_view pattern_regex(PreTokenizer pattern) { return known(pattern).regex; }

std::string_view pre_tokenizer_name(PreTokenizer pattern) { return known(pattern).name; }

std::optional<PreTokenizer> pre_tokenizer_of_regex(std::string_view regex) {
  for (const Known& k : kKnown) {
    if (k.regex == regex && k.pattern != PreTokenizer::sentencepiece) return k.pattern;
  }
  return std::nullopt;
}

}  // namespace ampt::text

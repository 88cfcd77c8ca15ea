#include "ampt/text/pretokenizer.h"

#include "ampt/text/unicode_class.h"
#include "ampt/text/utf8.h"

#include <array>

namespace ampt::text {
namespace {

constexpr std::array<CodeClass, 128> ascii_classes() {
  std::array<CodeClass, 128> classes{};
  for (int c = 0; c < 128; ++c) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      classes[c] = CodeClass::letter;
    } else if (c >= '0' && c <= '9') {
      classes[c] = CodeClass::number;
    } else if (c == ' ' || (c >= '\t' && c <= '\r')) {
      classes[c] = CodeClass::space;
    } else {
      classes[c] = CodeClass::other;
    }
  }
  return classes;
}
constexpr auto kAscii = ascii_classes();

struct Classified {
  CodeClass code_class;
  std::size_t length;
};

Classified classify(std::string_view text, std::size_t pos) {
  const auto byte = static_cast<unsigned char>(text[pos]);
  if (byte < 0x80) return {kAscii[byte], 1};
  const Utf8Char c = decode_utf8(text, pos);
  return {code_class(c.code_point), c.length};
}

std::size_t run_end(std::string_view text, std::size_t pos, CodeClass run_class) {
  while (pos < text.size()) {
    const Classified c = classify(text, pos);
    if (c.code_class != run_class) break;
    pos += c.length;
  }
  return pos;
}

// 's 't 're 've 'm 'll 'd: the length of the contraction at `begin`, or 0.
std::size_t contraction_length(std::string_view text, std::size_t begin) {
  if (text[begin] != '\'' || begin + 1 >= text.size()) return 0;
  const char next = text[begin + 1];
  if (next == 's' || next == 't' || next == 'm' || next == 'd') return 2;
  if (begin + 2 >= text.size()) return 0;
  const std::string_view two = text.substr(begin + 1, 2);
  return two == "re" || two == "ve" || two == "ll" ? 3 : 0;
}

}  // namespace

std::size_t piece_end(std::string_view text, std::size_t begin) {
  if (const std::size_t n = contraction_length(text, begin); n != 0) return begin + n;
  // " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+": an optional space, then a run of one class.
  if (text[begin] == ' ' && begin + 1 < text.size()) {
    const Classified next = classify(text, begin + 1);
    if (next.code_class != CodeClass::space) {
      return run_end(text, begin + 1 + next.length, next.code_class);
    }
  }
  const Classified first = classify(text, begin);
  if (first.code_class != CodeClass::space) {
    return run_end(text, begin + first.length, first.code_class);
  }
  // "\s+(?!\S)|\s+": whitespace to the end of the text, or up to its last character before a
  // non-space (which then starts the next piece, " word" say), or a single whitespace character.
  std::size_t last = begin;
  std::size_t pos = begin + first.length;
  while (pos < text.size()) {
    const Classified c = classify(text, pos);
    if (c.code_class != CodeClass::space) return last > begin ? last : pos;
    last = pos;
    pos += c.length;
  }
  return pos;
}

bool is_safe_cut(std::string_view text, std::size_t pos) {
  std::size_t before = pos - 1;
  while (before > 0 && (static_cast<unsigned char>(text[before]) & 0xC0) == 0x80) --before;
  if (text[before] == '\'') return false;
  const CodeClass left = classify(text, before).code_class;
  return left != CodeClass::space && left != classify(text, pos).code_class;
}

}  // namespace ampt::text

// UTF-8 as the reference tokenizers see it: they take Python str, so bytes reach them through
// bytes.decode("utf-8", "replace"), which turns each maximal ill-formed subpart (Unicode 3.9,
// "U+FFFD substitution of maximal subparts") into one U+FFFD. The same rule is applied here.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ampt::text {

struct Utf8Char {
  char32_t code_point = 0;  // U+FFFD for an ill-formed subpart
  std::size_t length = 0;   // bytes read: 1..4, never past the end
  bool valid = false;
};

// The character starting at `pos` (pos < text.size()).
Utf8Char decode_utf8(std::string_view text, std::size_t pos);

// The position of the first byte that is not part of well-formed UTF-8, or text.size().
std::size_t first_invalid_utf8(std::string_view text);

// `text` with every ill-formed subpart replaced by U+FFFD (EF BF BD), as Python's "replace" does.
std::string replace_invalid_utf8(std::string_view text);

}  // namespace ampt::text

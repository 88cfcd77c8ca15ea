#include "ampt/text/utf8.h"

#include <cstdint>
#include <cstring>

namespace ampt::text {
namespace {

constexpr char32_t kReplacement = 0xFFFD;

bool is_continuation(unsigned char byte) { return (byte & 0xC0) == 0x80; }

// The allowed range of the second byte after a lead byte (Unicode Table 3-7): it rules out
// overlong forms, surrogates and code points above U+10FFFF.
bool second_byte_ok(unsigned char lead, unsigned char second) {
  switch (lead) {
    case 0xE0: return second >= 0xA0 && second <= 0xBF;
    case 0xED: return second >= 0x80 && second <= 0x9F;
    case 0xF0: return second >= 0x90 && second <= 0xBF;
    case 0xF4: return second >= 0x80 && second <= 0x8F;
    default: return is_continuation(second);
  }
}

}  // namespace

Utf8Char decode_utf8(std::string_view text, std::size_t pos) {
  const auto lead = static_cast<unsigned char>(text[pos]);
  if (lead < 0x80) return {lead, 1, true};
  std::size_t need = 0;
  char32_t value = 0;
  if (lead >= 0xC2 && lead <= 0xDF) {
    need = 2;
    value = lead & 0x1F;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    need = 3;
    value = lead & 0x0F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    need = 4;
    value = lead & 0x07;
  } else {
    return {kReplacement, 1, false};
  }
  std::size_t length = 1;
  while (length < need) {
    if (pos + length >= text.size()) return {kReplacement, length, false};
    const auto byte = static_cast<unsigned char>(text[pos + length]);
    if (length == 1 ? !second_byte_ok(lead, byte) : !is_continuation(byte)) {
      return {kReplacement, length, false};
    }
    value = (value << 6) | (byte & 0x3F);
    ++length;
  }
  return {value, length, true};
}

std::size_t first_invalid_utf8(std::string_view text) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    // Eight ASCII bytes at a time: most text is mostly ASCII.
    while (pos + 8 <= text.size()) {
      uint64_t word = 0;
      std::memcpy(&word, text.data() + pos, sizeof word);
      if ((word & 0x8080808080808080ULL) != 0) break;
      pos += 8;
    }
    if (pos >= text.size()) break;
    const Utf8Char c = decode_utf8(text, pos);
    if (!c.valid) return pos;
    pos += c.length;
  }
  return text.size();
}

std::string replace_invalid_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 16);
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t bad = pos + first_invalid_utf8(text.substr(pos));
    out.append(text.substr(pos, bad - pos));
    if (bad == text.size()) break;
    out.append("\xEF\xBF\xBD");
    pos = bad + decode_utf8(text, bad).length;
  }
  return out;
}

}  // namespace ampt::text

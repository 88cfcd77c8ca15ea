#include "ampt/text/byte_alphabet.h"

#include "ampt/core/utf8_append.h"
#include "ampt/text/utf8.h"

#include <array>
#include <unordered_map>

namespace ampt::text {
namespace {

// The printable bytes stand for themselves, the other 68 (controls, space, DEL, NBSP, soft
// hyphen) for U+0100 onwards in byte order.
std::array<char32_t, 256> character_of_byte() {
  std::array<char32_t, 256> out{};
  char32_t shifted = 0x100;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    out[b] = printable ? static_cast<char32_t>(b) : shifted++;
  }
  return out;
}

const std::array<char32_t, 256>& characters() {
  static const auto table = character_of_byte();
  return table;
}

}  // namespace

std::string written_token(std::string_view bytes) {
  std::string out;
  for (const char b : bytes) append_utf8(out, characters()[static_cast<unsigned char>(b)]);
  return out;
}

bool token_bytes(std::string_view written, std::string& bytes) {
  static const auto byte_of = [] {
    std::unordered_map<char32_t, unsigned char> out;
    for (int b = 0; b < 256; ++b) out[characters()[b]] = static_cast<unsigned char>(b);
    return out;
  }();
  bytes.clear();
  for (std::size_t pos = 0; pos < written.size();) {
    const Utf8Char c = decode_utf8(written, pos);
    const auto it = byte_of.find(c.code_point);
    if (!c.valid || it == byte_of.end()) return false;
    bytes += static_cast<char>(it->second);
    pos += c.length;
  }
  return true;
}

}  // namespace ampt::text

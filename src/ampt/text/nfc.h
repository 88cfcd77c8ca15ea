// Unicode Normalization Form C (UAX #15), which Qwen2's tokenizer.json applies before its
// pre-tokenizer: canonical decomposition, canonical ordering of combining marks, then canonical
// composition. Tables from Python's unicodedata (scripts/gen_nfc_tables.py, nfc_tables.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ampt::text {

// `text` (well-formed UTF-8) in NFC. Text below U+0300 is NFC already and comes back as it is.
std::string to_nfc(std::string_view text);

// Whether NFC of text[0, pos) followed by NFC of text[pos, ...) is NFC of the whole: the character
// at `pos` is ASCII, which no normalization joins to what comes before. Parallel encoding of a
// normalizing tokenizer cuts only there.
inline bool is_nfc_boundary(std::string_view text, std::size_t pos) {
  return static_cast<unsigned char>(text[pos]) < 0x80;
}

namespace detail {

struct CombiningRange {
  char32_t first;
  char32_t last;
  uint8_t combining_class;
};
struct Decomposition {
  char32_t code_point;
  uint32_t offset;  // into kDecompositionData
  uint32_t length;
};
struct Composition {
  char32_t first;
  char32_t second;
  char32_t composite;
};

extern const CombiningRange kCombiningRanges[];
extern const std::size_t kCombiningRangeCount;
extern const char32_t kDecompositionData[];
extern const Decomposition kDecompositions[];
extern const std::size_t kDecompositionCount;
extern const Composition kCompositions[];
extern const std::size_t kCompositionCount;

}  // namespace detail
}  // namespace ampt::text

#include "ampt/text/nfc.h"

#include "ampt/core/utf8_append.h"
#include "ampt/text/utf8.h"

#include <algorithm>
#include <vector>

namespace ampt::text {
namespace {

using namespace detail;

// Hangul syllables decompose and compose by formula (Unicode §3.12), not by table.
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount;
constexpr char32_t kSCount = kLCount * kNCount;

uint8_t combining_class(char32_t c) {
  if (c < 0x300) return 0;
  const auto* end = kCombiningRanges + kCombiningRangeCount;
  const auto* it = std::upper_bound(kCombiningRanges, end, c,
                                    [](char32_t v, const CombiningRange& r) { return v < r.first; });
  if (it == kCombiningRanges) return 0;
  --it;
  return c <= it->last ? it->combining_class : 0;
}

void decompose(char32_t c, std::vector<char32_t>& out) {
  if (c >= kSBase && c < kSBase + kSCount) {
    const char32_t s = c - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount != 0) out.push_back(kTBase + s % kTCount);
    return;
  }
  const auto* end = kDecompositions + kDecompositionCount;
  const auto* it = std::lower_bound(kDecompositions, end, c,
                                    [](const Decomposition& d, char32_t v) { return d.code_point < v; });
  if (it == end || it->code_point != c) {
    out.push_back(c);
    return;
  }
  out.insert(out.end(), kDecompositionData + it->offset, kDecompositionData + it->offset + it->length);
}

// The composite of (first, second), or 0 when they do not compose.
char32_t compose(char32_t first, char32_t second) {
  if (first >= kLBase && first < kLBase + kLCount && second >= kVBase && second < kVBase + kVCount) {
    return kSBase + ((first - kLBase) * kVCount + (second - kVBase)) * kTCount;
  }
  if (first >= kSBase && first < kSBase + kSCount && (first - kSBase) % kTCount == 0 &&
      second > kTBase && second < kTBase + kTCount) {
    return first + (second - kTBase);
  }
  const auto* end = kCompositions + kCompositionCount;
  const auto* it = std::lower_bound(kCompositions, end, std::pair{first, second},
                                    [](const Composition& c, const std::pair<char32_t, char32_t>& v) {
                                      return c.first != v.first ? c.first < v.first : c.second < v.second;
                                    });
  return it != end && it->first == first && it->second == second ? it->composite : 0;
}

}  // namespace

std::string to_nfc(std::string_view text) {
  if (std::ranges::none_of(text, [](char b) { return static_cast<unsigned char>(b) >= 0xCC; })) {
    return std::string(text);  // every code point below U+0300: NFC as it is
  }
  std::vector<char32_t> chars;
  chars.reserve(text.size());
  for (std::size_t pos = 0; pos < text.size();) {
    const Utf8Char c = decode_utf8(text, pos);
    decompose(c.code_point, chars);
    pos += c.length;
  }
  // Canonical ordering: each run of non-starters sorted by combining class, stably.
  for (std::size_t i = 0; i < chars.size();) {
    if (combining_class(chars[i]) == 0) {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < chars.size() && combining_class(chars[j]) != 0) ++j;
    std::stable_sort(chars.begin() + static_cast<std::ptrdiff_t>(i), chars.begin() + static_cast<std::ptrdiff_t>(j),
                     [](char32_t a, char32_t b) { return combining_class(a) < combining_class(b); });
    i = j;
  }
  // Canonical composition: each character joins the last starter unless blocked by a character
  // between them of the same or a higher class (or a starter).
  std::vector<char32_t> out;
  out.reserve(chars.size());
  std::ptrdiff_t starter = -1;
  int last_class = -1;
  for (const char32_t c : chars) {
    const int cls = combining_class(c);
    if (starter >= 0) {
      const bool blocked = last_class != -1 && (last_class == 0 || last_class >= cls);
      if (!blocked) {
        if (const char32_t composite = compose(out[static_cast<std::size_t>(starter)], c); composite != 0) {
          out[static_cast<std::size_t>(starter)] = composite;
          continue;
        }
      }
    }
    if (cls == 0) {
      starter = static_cast<std::ptrdiff_t>(out.size());
      last_class = -1;
    } else {
      last_class = cls;
    }
    out.push_back(c);
  }
  std::string result;
  result.reserve(text.size());
  for (const char32_t c : out) append_utf8(result, c);
  return result;
}

}  // namespace ampt::text

#include "ampt/text/unicode_class.h"

#include <array>
#include <map>
#include <vector>

namespace ampt::text {
namespace {

constexpr char32_t kCodeSpace = 0x110000;
constexpr int kBlockBits = 8;
constexpr char32_t kBlockSize = char32_t{1} << kBlockBits;

// A two-stage table built once from the generated ranges: block index per 256 code points, then
// the deduplicated blocks (a few hundred), so a lookup is two loads instead of a binary search.
class ClassTable {
 public:
  ClassTable() {
    std::vector<CodeClass> all(kCodeSpace, CodeClass::other);
    for (std::size_t i = 0; i < detail::kCodeRangeCount; ++i) {
      const auto& range = detail::kCodeRanges[i];
      for (char32_t c = range.first; c <= range.last; ++c) all[c] = range.code_class;
    }
    std::map<std::vector<CodeClass>, uint16_t> seen;
    for (char32_t block = 0; block < kCodeSpace / kBlockSize; ++block) {
      std::vector<CodeClass> classes(all.begin() + block * kBlockSize,
                                     all.begin() + (block + 1) * kBlockSize);
      const auto [it, added] = seen.emplace(classes, static_cast<uint16_t>(seen.size()));
      if (added) classes_.insert(classes_.end(), classes.begin(), classes.end());
      block_of_[block] = it->second;
    }
  }

  CodeClass operator()(char32_t c) const {
    if (c >= kCodeSpace) return CodeClass::other;
    return classes_[(static_cast<std::size_t>(block_of_[c >> kBlockBits]) << kBlockBits) |
                    (c & (kBlockSize - 1))];
  }

 private:
  std::array<uint16_t, kCodeSpace / kBlockSize> block_of_{};
  std::vector<CodeClass> classes_;
};

}  // namespace

CodeClass code_class(char32_t code_point) {
  static const ClassTable table;
  return table(code_point);
}

}  // namespace ampt::text

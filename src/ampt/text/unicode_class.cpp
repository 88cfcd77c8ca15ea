#include "ampt/text/unicode_class.h"

#include <algorithm>
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
  using Block = std::array<CodeClass, kBlockSize>;

 public:
  ClassTable() {
    std::map<Block, uint16_t> seen;
    std::size_t next_range = 0;
    for (char32_t block = 0; block < kCodeSpace / kBlockSize; ++block) {
      const char32_t first = block * kBlockSize;
      const char32_t last = first + kBlockSize - 1;
      Block classes{};  // zero: CodeClass::other
      while (next_range < detail::kCodeRangeCount && detail::kCodeRanges[next_range].last < first) {
        ++next_range;
      }
      for (std::size_t i = next_range;
           i < detail::kCodeRangeCount && detail::kCodeRanges[i].first <= last; ++i) {
        const auto& range = detail::kCodeRanges[i];
        for (char32_t c = std::max(range.first, first); c <= std::min(range.last, last); ++c) {
          classes[c - first] = range.code_class;
        }
      }
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

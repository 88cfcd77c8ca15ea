// The snapshot copy (pieces on several threads, streaming stores after an unaligned head) leaves
// exactly the source bytes in the target and touches nothing around it.
#include "ampt/checkpoint/byte_copy.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <vector>

using ampt::checkpoint::ByteCopy;
using ampt::checkpoint::copy_bytes;

namespace {

std::vector<uint8_t> byte_pattern(size_t bytes, uint8_t seed) {
  std::vector<uint8_t> out(bytes);
  for (size_t i = 0; i < bytes; ++i) out[i] = static_cast<uint8_t>(i * 131 + seed + i / 4099);
  return out;
}

}  // namespace

TEST_CASE("copy_bytes: every byte arrives, whatever the sizes and alignments", "[checkpoint]") {
  // Sizes around the 64-byte blocks and the 4 MiB pieces, targets off the 16-byte alignment the
  // streaming stores need, and enough bytes in all for helper threads to take part.
  const std::vector<size_t> sizes{0, 1, 15, 16, 63, 64, 65, 1000, (4u << 20) - 1, (4u << 20) + 17,
                                  (9u << 20) + 5, 3u << 20};
  std::vector<std::vector<uint8_t>> sources;
  std::vector<std::vector<uint8_t>> targets;
  std::vector<ByteCopy> copies;
  for (size_t i = 0; i < sizes.size(); ++i) {
    sources.push_back(byte_pattern(sizes[i], static_cast<uint8_t>(i)));
    const size_t misalign = i % 7;  // target starts at data() + misalign
    targets.emplace_back(sizes[i] + misalign + 64, uint8_t{0xAB});
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    copies.push_back({targets[i].data() + i % 7, sources[i].data(), sizes[i]});
  }
  copy_bytes(copies);
  for (size_t i = 0; i < sizes.size(); ++i) {
    INFO("copy " << i << " of " << sizes[i] << " bytes");
    const uint8_t* start = targets[i].data() + i % 7;
    const uint8_t* end = targets[i].data() + targets[i].size();
    CHECK(std::equal(sources[i].begin(), sources[i].end(), start));
    // Nothing written outside the target range.
    const auto untouched = [](uint8_t b) { return b == 0xAB; };
    CHECK(std::all_of(static_cast<const uint8_t*>(targets[i].data()), start, untouched));
    CHECK(std::all_of(start + sizes[i], end, untouched));
  }
}

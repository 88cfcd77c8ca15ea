// The checkpoint checksum's CRC-32: the folded fast path and the combination of two CRCs agree
// with the definition, computed here one bit at a time.
#include "ampt/checkpoint/crc32.h"

#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace {

// CRC-32 by its definition: reflected polynomial 0xEDB88320, register and result inverted.
uint32_t crc32_bitwise(const unsigned char* bytes, size_t size) {
  uint32_t crc = 0xFFFFFFFFU;
  for (size_t i = 0; i < size; ++i) {
    crc ^= bytes[i];
    for (int bit = 0; bit < 8; ++bit) crc = (crc & 1U) != 0 ? (crc >> 1) ^ 0xEDB88320U : crc >> 1;
  }
  return ~crc;
}

std::vector<unsigned char> random_bytes(size_t size, unsigned seed) {
  std::mt19937 random(seed);
  std::vector<unsigned char> bytes(size);
  for (auto& b : bytes) b = static_cast<unsigned char>(random());
  return bytes;
}

}  // namespace

TEST_CASE("crc32: the check value of the CRC-32 catalogue", "[checkpoint][crc32]") {
  const std::string check = "123456789";
  CHECK(ampt::checkpoint::crc32(0, check.data(), check.size()) == 0xCBF43926U);
  CHECK(ampt::checkpoint::crc32(0, nullptr, 0) == 0U);
}

TEST_CASE("crc32: every length and alignment equals the bitwise definition", "[checkpoint][crc32]") {
  const auto bytes = random_bytes(5000, 1);
  // Lengths around the 16- and 64-byte folding boundaries, from unaligned starts.
  for (size_t offset : {0, 1, 7, 13}) {
    for (size_t size = 0; size < 300; ++size) {
      INFO("offset " << offset << ", size " << size);
      REQUIRE(ampt::checkpoint::crc32(0, bytes.data() + offset, size) ==
              crc32_bitwise(bytes.data() + offset, size));
    }
    for (size_t size : {1023, 1024, 1025, 4096 + 48, 4999 - 13}) {
      INFO("offset " << offset << ", size " << size);
      CHECK(ampt::checkpoint::crc32(0, bytes.data() + offset, size) ==
            crc32_bitwise(bytes.data() + offset, size));
    }
  }
  // Continuing a CRC across calls equals one call over the whole.
  const uint32_t first = ampt::checkpoint::crc32(0, bytes.data(), 1234);
  CHECK(ampt::checkpoint::crc32(first, bytes.data() + 1234, 3000) ==
        crc32_bitwise(bytes.data(), 4234));
}

TEST_CASE("crc32: combining two CRCs gives the CRC of the concatenation", "[checkpoint][crc32]") {
  const auto bytes = random_bytes(70000, 2);
  for (size_t split : {0, 1, 63, 64, 1000, 65536, 70000}) {
    INFO("split " << split);
    const uint32_t a = ampt::checkpoint::crc32(0, bytes.data(), split);
    const uint32_t b = ampt::checkpoint::crc32(0, bytes.data() + split, bytes.size() - split);
    CHECK(ampt::checkpoint::crc32_combine(a, b, bytes.size() - split) ==
          crc32_bitwise(bytes.data(), bytes.size()));
  }
}

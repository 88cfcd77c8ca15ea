// Table-driven reflected CRC-32s, shared by the checksums that differ only in their polynomial:
// CRC-32 (zlib, checkpoints) and CRC-32C (Castagnoli, TensorFlow's record files).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace ampt {

using CrcTable = std::array<uint32_t, 256>;

// The byte table of the reflected CRC-32 with (reversed) `polynomial`.
constexpr CrcTable reflected_crc_table(uint32_t polynomial) {
  CrcTable table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1U) != 0 ? polynomial ^ (c >> 1) : c >> 1;
    table[i] = c;
  }
  return table;
}

// Continues `crc` (0 to start) over `size` bytes, with the usual pre- and post-inversion.
inline uint32_t reflected_crc(const CrcTable& table, uint32_t crc, const void* data, size_t size) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  crc = ~crc;
  for (size_t i = 0; i < size; ++i) crc = table[(crc ^ bytes[i]) & 0xFFU] ^ (crc >> 8);
  return ~crc;
}

}  // namespace ampt

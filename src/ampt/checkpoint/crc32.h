// CRC-32 (IEEE 802.3, as zlib and zip compute it), to detect corrupt checkpoint contents.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ampt::checkpoint {

// Continues `crc` over `size` bytes; start with 0.
uint32_t crc32(uint32_t crc, const void* data, size_t size);

}  // namespace ampt::checkpoint

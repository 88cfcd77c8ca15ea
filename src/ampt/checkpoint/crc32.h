// CRC-32 (IEEE 802.3, as zlib and zip compute it), to detect corrupt checkpoint contents.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ampt::checkpoint {

// Continues `crc` over `size` bytes; start with 0. Folds 64 bytes at a time with carry-less
// multiplication where the CPU has it (x86-64 with PCLMULQDQ: several GB/s, so a checkpoint's
// checksum costs a fraction of its write), a byte at a time elsewhere.
uint32_t crc32(uint32_t crc, const void* data, size_t size);

// The CRC of A followed by B, from crc32(A), crc32(B) and B's length: records checksummed one
// by one give the checksum of their concatenation without a second pass over the bytes.
uint32_t crc32_combine(uint32_t crc_a, uint32_t crc_b, uint64_t size_b);

}  // namespace ampt::checkpoint

// CRC-32C (Castagnoli) and the masked form TensorFlow's record files store, so that a reader
// can tell a complete record from one cut short or damaged.
#pragma once

#include <cstdint>
#include <string_view>

namespace ampt::log {

uint32_t crc32c(std::string_view bytes);

// TensorFlow's mask: rotate right by 15 bits and add 0xa282ead8, so that a CRC stored in the data
// it covers does not checksum to a constant.
uint32_t mask_crc(uint32_t crc);

}  // namespace ampt::log

#include "ampt/checkpoint/crc32.h"

#include "ampt/core/crc.h"

namespace ampt::checkpoint {
namespace {

constexpr auto kTable = reflected_crc_table(0xEDB88320U);

}  // namespace

uint32_t crc32(uint32_t crc, const void* data, size_t size) {
  return reflected_crc(kTable, crc, data, size);
}

}  // namespace ampt::checkpoint

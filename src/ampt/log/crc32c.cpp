#include "ampt/log/crc32c.h"

#include "ampt/core/crc.h"

namespace ampt::log {
namespace {

constexpr auto kTable = reflected_crc_table(0x82F63B78U);

}  // namespace

uint32_t crc32c(std::string_view bytes) {
  return reflected_crc(kTable, 0, bytes.data(), bytes.size());
}

uint32_t mask_crc(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8U; }

}  // namespace ampt::log

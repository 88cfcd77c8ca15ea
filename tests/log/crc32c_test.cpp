// CRC-32C against the published check values (RFC 3720 appendix B.4 and the "123456789" check),
// and the mask against tensorboard's own masked_crc32c.
#include "ampt/log/crc32c.h"

#include <catch2/catch.hpp>

#include <numeric>
#include <string>

using ampt::log::crc32c;
using ampt::log::mask_crc;

TEST_CASE("crc32c: the standard check values", "[log][tensorboard]") {
  CHECK(crc32c("") == 0U);
  CHECK(crc32c("123456789") == 0xE3069283U);
  CHECK(crc32c(std::string(32, '\0')) == 0x8A9136AAU);
  CHECK(crc32c(std::string(32, '\xFF')) == 0x62A8AB43U);
  std::string ascending(32, '\0');
  std::iota(ascending.begin(), ascending.end(), '\0');
  CHECK(crc32c(ascending) == 0x46DD794EU);
  const std::string descending(ascending.rbegin(), ascending.rend());
  CHECK(crc32c(descending) == 0x113FDB5CU);
}

TEST_CASE("crc32c: the mask TensorFlow records store", "[log][tensorboard]") {
  // tensorboard.compat.tensorflow_stub.pywrap_tensorflow.masked_crc32c(b"...")
  CHECK(mask_crc(crc32c("")) == 0xa282ead8U);
  CHECK(mask_crc(crc32c("123456789")) == 0xc78ab0e5U);
}

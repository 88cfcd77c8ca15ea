// Bytes as lower-case hex, to compare binary output with a reference written the same way
// (Python's bytes.hex()).
#pragma once

#include <fmt/format.h>

#include <string>
#include <string_view>

namespace ampt::test {

inline std::string hex(std::string_view bytes) {
  std::string out;
  for (const unsigned char c : bytes) out += fmt::format("{:02x}", c);
  return out;
}

}  // namespace ampt::test

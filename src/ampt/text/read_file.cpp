#include "ampt/text/read_file.h"

#include "ampt/core/errors.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace ampt::text {

std::string read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw RuntimeError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (in.bad()) throw RuntimeError(fmt::format("{}: read failed: {}", path, std::strerror(errno)));
  std::string text = std::move(bytes).str();
  if (text.empty()) throw RuntimeError(fmt::format("{}: file is empty", path));
  return text;
}

}  // namespace ampt::text

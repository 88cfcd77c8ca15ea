#include "ampt/text/read_file.h"

#include "ampt/core/whole_file.h"

#include <fmt/format.h>

#include <cstring>

namespace ampt::text {

std::string read_text_file(const std::string& path) {
  std::string text;
  try {
    text = read_whole_file(path);
  } catch (const FileReadError& error) {
    throw RuntimeError(fmt::format("{}: cannot open: {}", path, std::strerror(error.code())));
  }
  if (text.empty()) throw RuntimeError(fmt::format("{}: file is empty", path));
  return text;
}

}  // namespace ampt::text

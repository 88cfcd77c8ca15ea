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

JsonValue read_json_file(const std::string& path, std::string_view what) {
  const std::string text = read_text_file(path);
  try {
    return parse_json(text);
  } catch (const JsonError& e) {
    throw RuntimeError(fmt::format("{}: invalid JSON ({}): {}", path, what, e.what()));
  }
}

}  // namespace ampt::text

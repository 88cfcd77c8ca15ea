#include "ampt/core/whole_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace ampt {

std::string errno_text(int code) {
  const char* name = strerrorname_np(code);
  const std::string text = std::strerror(code);
  return name != nullptr ? text + " (" + name + ")" : text;
}

FileReadError::FileReadError(std::string path, int code)
    : RuntimeError("cannot read '" + path + "': " + errno_text(code)),
      path_(std::move(path)),
      code_(code) {}

std::string read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FileReadError(path, errno);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (in.bad()) throw FileReadError(path, errno);
  return std::move(bytes).str();
}

}  // namespace ampt

#include "ampt/checkpoint/atomic_file.h"

#include "ampt/core/errors.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace ampt::checkpoint {
namespace {

namespace fs = std::filesystem;
constexpr std::string_view kTempMarker = ".tmp-";

[[noreturn]] void fail(const std::string& action, const std::string& path) {
  throw RuntimeError("cannot " + action + " '" + path + "': " + std::strerror(errno));
}

void fsync_directory(const fs::path& directory) {
  const int fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) fail("open directory", directory.string());
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) fail("sync directory", directory.string());
}

}  // namespace

void write_file_atomically(const std::string& path, std::string_view bytes) {
  const fs::path target(path);
  const fs::path directory = target.has_parent_path() ? target.parent_path() : fs::path(".");
  // A leading dot keeps the temporary out of checkpoint listings; the pid keeps two writers apart.
  const fs::path temp = directory / ("." + target.filename().string() + std::string(kTempMarker) +
                                     std::to_string(::getpid()));
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("create", temp.string());
  size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      ::unlink(temp.c_str());
      fail("write", temp.string());
    }
    written += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(temp.c_str());
    fail("flush", temp.string());
  }
  if (::rename(temp.c_str(), target.c_str()) != 0) {
    ::unlink(temp.c_str());
    fail("rename into", path);
  }
  fsync_directory(directory);
}

std::vector<char> read_whole_file(const std::string& path, std::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (!fs::exists(path)) throw RuntimeError(std::string(what) + " '" + path + "' not found");
    fail("read", path);
  }
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void remove_stale_temporaries(const std::string& directory) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(directory, ec)) {
    const auto name = entry.path().filename().string();
    if (name.starts_with(".") && name.find(kTempMarker) != std::string::npos) {
      fs::remove(entry.path(), ec);
    }
  }
}

}  // namespace ampt::checkpoint

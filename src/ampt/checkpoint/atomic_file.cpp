#include "ampt/checkpoint/atomic_file.h"

#include "ampt/core/errors.h"
#include "ampt/core/whole_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace ampt::checkpoint {
namespace {

namespace fs = std::filesystem;
constexpr std::string_view kTempMarker = ".tmp-";
// Writeback is started for every this many bytes written.
constexpr uint64_t kWritebackChunk = uint64_t{32} << 20;

void fsync_directory(const fs::path& directory, const std::string& path) {
  const int fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  const int rc = fd < 0 ? -1 : ::fsync(fd);
  const int error = errno;
  if (fd >= 0) ::close(fd);
  if (rc != 0) {
    throw RuntimeError("cannot sync the directory of '" + path + "': " + errno_text(error));
  }
}

}  // namespace

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  const fs::path target(path_);
  const fs::path directory = target.has_parent_path() ? target.parent_path() : fs::path(".");
  // A leading dot keeps the temporary out of checkpoint listings; the pid keeps two writers apart.
  temp_ = (directory / ("." + target.filename().string() + std::string(kTempMarker) +
                        std::to_string(::getpid())))
              .string();
  fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    throw RuntimeError("cannot create a temporary file for '" + path_ + "' (" + temp_ +
                       "): " + errno_text(errno));
  }
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!temp_.empty()) ::unlink(temp_.c_str());
}

void AtomicFile::fail(const std::string& action) {
  const int error = errno;
  ::close(fd_);
  fd_ = -1;
  ::unlink(temp_.c_str());
  temp_.clear();
  throw RuntimeError("cannot " + action + " '" + path_ + "': " + errno_text(error));
}

void AtomicFile::write(const void* data, size_t size) {
  const auto* bytes = static_cast<const char*>(data);
  while (size > 0) {
    const auto piece = static_cast<size_t>(std::min<uint64_t>(size, kWritebackChunk));
    const ssize_t n = ::write(fd_, bytes, piece);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;
      fail("write");
    }
    bytes += n;
    size -= static_cast<size_t>(n);
    written_ += static_cast<uint64_t>(n);
    if (written_ - handed_to_disk_ >= kWritebackChunk) start_writeback();
  }
}

void AtomicFile::write_at(uint64_t offset, const void* data, size_t size) {
  const ssize_t n = ::pwrite(fd_, data, size, static_cast<off_t>(offset));
  if (n != static_cast<ssize_t>(size)) {
    if (n >= 0) errno = EIO;
    fail("write");
  }
}

void AtomicFile::start_writeback() {
  // Start writing the newest chunk, then wait for the one before it: the disk always has work
  // and the page cache holds at most two chunks of this file's dirty pages. Pages already on
  // disk are dropped from the cache, where a checkpoint would only push out the training data.
  // Errors are left to fsync, which reports every failed writeback.
  const auto start = static_cast<off64_t>(handed_to_disk_);
  const auto chunk = static_cast<off64_t>(kWritebackChunk);
  ::sync_file_range(fd_, start, chunk, SYNC_FILE_RANGE_WRITE);
  if (start >= chunk) {
    ::sync_file_range(fd_, start - chunk, chunk,
                      SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                          SYNC_FILE_RANGE_WAIT_AFTER);
    ::posix_fadvise(fd_, start - chunk, chunk, POSIX_FADV_DONTNEED);
  }
  handed_to_disk_ += kWritebackChunk;
}

void AtomicFile::commit() {
  if (::fsync(fd_) != 0) fail("flush");
  if (::close(fd_) != 0) {
    fd_ = -1;
    fail("close");
  }
  fd_ = -1;
  if (::rename(temp_.c_str(), path_.c_str()) != 0) {
    const int error = errno;
    ::unlink(temp_.c_str());
    temp_.clear();
    throw RuntimeError("cannot rename the complete temporary file into '" + path_ + "': " +
                       errno_text(error));
  }
  temp_.clear();
  const fs::path target(path_);
  fsync_directory(target.has_parent_path() ? target.parent_path() : fs::path("."), path_);
}

void write_file_atomically(const std::string& path, std::string_view bytes) {
  AtomicFile file(path);
  file.write(bytes.data(), bytes.size());
  file.commit();
}

std::string read_checkpoint_file(const std::string& path, std::string_view what) {
  try {
    return read_whole_file(path);
  } catch (const FileReadError& error) {
    if (error.code() == ENOENT) throw RuntimeError(std::string(what) + " '" + path + "' not found");
    throw;
  }
}

void remove_stale_temporaries(const std::string& directory, const std::string& of_file) {
  std::error_code ec;
  const std::string prefix = "." + of_file;
  for (const auto& entry : fs::directory_iterator(directory, ec)) {
    const auto name = entry.path().filename().string();
    if (name.starts_with(prefix) && name.find(kTempMarker) != std::string::npos) {
      fs::remove(entry.path(), ec);
    }
  }
}

}  // namespace ampt::checkpoint

#include "ampt/core/mapped_file.h"

#include "ampt/core/errors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ampt {
namespace {

RuntimeError file_error(const std::string& path, const std::string& what) {
  return RuntimeError(path + ": " + what);
}

}  // namespace

MappedFile::MappedFile(std::string path) : path_(std::move(path)) {
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw file_error(path_, std::string("cannot open: ") + std::strerror(errno));
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    throw file_error(path_, "not a regular file");
  }
  size_ = static_cast<std::size_t>(info.st_size);
  if (size_ == 0) {
    ::close(fd);
    throw file_error(path_, "file is empty");
  }
  void* mapped = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
  const int map_errno = errno;
  ::close(fd);  // the mapping keeps the file alive
  if (mapped == MAP_FAILED) {
    throw file_error(path_, std::string("cannot mmap: ") + std::strerror(map_errno));
  }
  data_ = static_cast<const std::uint8_t*>(mapped);
}

MappedFile::~MappedFile() { ::munmap(const_cast<std::uint8_t*>(data_), size_); }

}  // namespace ampt

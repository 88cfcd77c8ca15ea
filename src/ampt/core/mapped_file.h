// A read-only memory mapping of a whole file: token shards, text and checkpoints are read in
// place, not copied.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ampt {

class MappedFile {
 public:
  // Throws RuntimeError naming `path` when it cannot be opened or mapped, or is empty.
  explicit MappedFile(std::string path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::uint8_t* data() const { return data_; }
  std::size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace ampt

// Crash-safe file replacement: a reader sees the old file or the new one, never a mix.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ampt::checkpoint {

// A file written under a temporary name in its destination's directory and renamed over the
// destination only when complete and on disk (fsync, rename, fsync of the directory), so a crash
// or SIGKILL at any moment leaves either the previous file or the whole new one. Every failure
// is a RuntimeError naming the destination and the errno: "cannot write 'runs/a/ckpt-00000010.pt':
// No space left on device (ENOSPC)". A file never committed is removed.
class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Appends `size` bytes. Large files are handed to the disk as they are written (writeback
  // started every few tens of MiB, at most two such ranges in flight), so the disk works while
  // the caller prepares the next bytes and commit() finds little left to flush.
  void write(const void* data, size_t size);
  // Overwrites bytes already written (a header completed after its data).
  void write_at(uint64_t offset, const void* data, size_t size);
  uint64_t size() const { return written_; }
  void commit();

 private:
  void start_writeback();
  [[noreturn]] void fail(const std::string& action);

  std::string path_;
  std::string temp_;
  int fd_ = -1;
  uint64_t written_ = 0;
  uint64_t handed_to_disk_ = 0;  // bytes whose writeback has been started
};

// Writes `bytes` to `path` through an AtomicFile.
void write_file_atomically(const std::string& path, std::string_view bytes);

// The whole file (core/whole_file.h); RuntimeError "WHAT 'PATH' not found" when it does not
// exist.
std::string read_checkpoint_file(const std::string& path, std::string_view what);

// Removes temporary files a killed writer left behind in `directory`: all of them, or only
// those of the file named `of_file` (when several writers share the directory).
void remove_stale_temporaries(const std::string& directory, const std::string& of_file = "");

}  // namespace ampt::checkpoint

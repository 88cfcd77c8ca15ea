// Crash-safe directory replacement: a reader sees the old directory or the whole new one, never
// a directory half written. What AtomicFile (atomic_file.h) is for one file, for several.
#pragma once

#include <string>
#include <vector>

namespace ampt::checkpoint {

// A directory written under a temporary name beside its destination (".NAME.tmp-PID") and
// renamed into place only when complete and on disk: every file in it and the directory itself
// synced, renamed, the parent synced. An existing destination directory is exchanged with the
// new one in one rename (renameat2 RENAME_EXCHANGE) and then removed, so it is replaced whole:
// no file of it stays beside the new ones. Where the file system cannot exchange, the old one is
// moved aside first and put back if the new one cannot take its place. Parents that do not
// exist are created. Until commit() a failure or an exception leaves nothing: the destructor
// removes the temporary directory and the parents it created. A process killed before the
// rename leaves its temporary, named for the destination and the pid, and the destination as
// it was. Every failure is a RuntimeError naming the destination and the errno.
class AtomicDirectory {
 public:
  // Throws when `path` is a file, or the temporary cannot be made.
  explicit AtomicDirectory(std::string path);
  ~AtomicDirectory();
  AtomicDirectory(const AtomicDirectory&) = delete;
  AtomicDirectory& operator=(const AtomicDirectory&) = delete;

  // Where the files go until commit(): the temporary directory.
  const std::string& path() const { return temp_; }
  const std::string& destination() const { return path_; }
  void commit();

 private:
  std::string path_;    // as the caller named it, for messages
  std::string target_;  // absolute, normalized
  std::string temp_;
  std::vector<std::string> created_parents_;  // deepest last
  bool committed_ = false;
};

}  // namespace ampt::checkpoint

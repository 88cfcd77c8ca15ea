#include "ampt/checkpoint/atomic_directory.h"

#include "ampt/core/errors.h"
#include "ampt/core/whole_file.h"

#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>

namespace ampt::checkpoint {
namespace {

namespace fs = std::filesystem;

// The destination as a name in its parent: "out/" and "out/." are "out", "." the working
// directory's own name, so the temporary can sit beside it.
fs::path normalized(const std::string& path) {
  fs::path p = fs::absolute(path).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();
  return p;
}

// fsync of one file or directory: 0, or the errno.
int sync_one(const char* path, int flags) {
  const int fd = ::open(path, flags | O_CLOEXEC);
  const int rc = fd < 0 ? -1 : ::fsync(fd);
  const int error = errno;
  if (fd >= 0) ::close(fd);
  return rc == 0 ? 0 : error;
}

void sync_path(const fs::path& path, int flags, const std::string& destination) {
  if (const int error = sync_one(path.c_str(), flags); error != 0) {
    throw RuntimeError("cannot sync '" + path.string() + "' of '" + destination + "': " + errno_text(error));
  }
}

// The trees are walked with nftw: std::filesystem::remove_all resolves to the copy that
// libtorch.so exports, which crashes when called from code built by a newer GCC.
thread_local std::string failed_entry;

int sync_entry(const char* path, const struct stat*, int type, struct FTW*) {
  const int error = sync_one(path, type == FTW_DP || type == FTW_D ? O_RDONLY | O_DIRECTORY : O_RDONLY);
  if (error != 0) failed_entry = path;
  return error;
}

int remove_entry(const char* path, const struct stat*, int, struct FTW*) { return ::remove(path); }

// Removes `path` and all under it, as far as it can: what is left is a leftover, not an error.
void remove_tree(const std::string& path) { ::nftw(path.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS); }

}  // namespace

AtomicDirectory::AtomicDirectory(std::string path)
    : path_(std::move(path)), target_(normalized(path_).string()) {
  const fs::path target(target_);
  std::error_code error;
  if (fs::exists(target, error) && !fs::is_directory(target, error)) {
    throw RuntimeError("cannot write the directory '" + path_ + "': a file is in the way");
  }
  std::vector<fs::path> missing;
  for (fs::path parent = target.parent_path(); !fs::exists(parent, error); parent = parent.parent_path()) {
    missing.push_back(parent);
  }
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    if (!fs::create_directory(*it, error) && error) {
      throw RuntimeError("cannot create '" + it->string() + "' for '" + path_ + "': " + error.message());
    }
    created_parents_.push_back(it->string());
  }
  temp_ = (target.parent_path() / ("." + target.filename().string() + ".tmp-" + std::to_string(::getpid())))
              .string();
  remove_tree(temp_);  // one this pid's predecessor left
  if (::mkdir(temp_.c_str(), 0755) != 0) {
    const int code = errno;
    const std::string temp = temp_;
    temp_.clear();
    throw RuntimeError("cannot create a temporary directory for '" + path_ + "' (" + temp + "): " + errno_text(code));
  }
}

AtomicDirectory::~AtomicDirectory() {
  if (committed_) return;
  std::error_code error;
  if (!temp_.empty()) remove_tree(temp_);
  for (auto it = created_parents_.rbegin(); it != created_parents_.rend(); ++it) fs::remove(*it, error);
}

void AtomicDirectory::commit() {
  // Copies and small files were written without a sync of their own: sync everything, then the
  // directory that names them, before a rename can publish it.
  // (nftw visits the directory itself last.)
  if (const int code = ::nftw(temp_.c_str(), sync_entry, 16, FTW_DEPTH | FTW_PHYS); code != 0) {
    throw RuntimeError("cannot sync '" + failed_entry + "' of '" + path_ + "': " +
                       errno_text(code > 0 ? code : errno));
  }
  const fs::path target(target_);
  std::error_code error;
  const auto fail = [&](const std::string& what, int code) {
    throw RuntimeError("cannot " + what + " '" + path_ + "': " + errno_text(code));
  };
  if (!fs::exists(target, error)) {
    if (::rename(temp_.c_str(), target.c_str()) != 0) fail("rename the complete temporary directory into", errno);
  } else if (::renameat2(AT_FDCWD, temp_.c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE) == 0) {
    committed_ = true;
    // The old directory now has the temporary's name. Removing it is tidying: the new one is in
    // place whatever happens here.
    remove_tree(temp_);
  } else if (errno == EINVAL || errno == ENOSYS || errno == ENOTSUP) {
    const fs::path aside =
        target.parent_path() / ("." + target.filename().string() + ".old-" + std::to_string(::getpid()));
    if (::rename(target.c_str(), aside.c_str()) != 0) fail("move aside the directory it replaces,", errno);
    if (::rename(temp_.c_str(), target.c_str()) != 0) {
      const int code = errno;
      ::rename(aside.c_str(), target.c_str());
      fail("rename the complete temporary directory into", code);
    }
    committed_ = true;
    remove_tree(aside.string());
  } else {
    fail("exchange the complete temporary directory with", errno);
  }
  committed_ = true;
  sync_path(target.parent_path(), O_RDONLY | O_DIRECTORY, path_);
}

}  // namespace ampt::checkpoint

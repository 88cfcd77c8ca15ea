// Reading a file whole, for every folder that does (tokenizer files, metric files a resumed run
// continues, checkpoint manifests and pointers): one reader, and a typed error that says why, so
// each caller words its own message.
#pragma once

#include "ampt/core/errors.h"

#include <string>

namespace ampt {

// The file could not be read: `path` and errno's `code` (ENOENT: it is not there).
class FileReadError : public RuntimeError {
 public:
  FileReadError(std::string path, int code);
  const std::string& path() const { return path_; }
  int code() const { return code_; }

 private:
  std::string path_;
  int code_;
};

// strerror's text for an errno value, with its symbolic name: "No such file or directory
// (ENOENT)".
std::string errno_text(int code);

// The bytes of the file at `path`, as they are. Throws FileReadError ("cannot read 'PATH':
// REASON") when it cannot be opened or read.
std::string read_whole_file(const std::string& path);

}  // namespace ampt

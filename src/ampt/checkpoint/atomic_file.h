// Crash-safe file replacement: a reader sees the old file or the new one, never a mix.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ampt::checkpoint {

// Writes `bytes` to a temporary file in `path`'s directory, flushes it to disk (fsync), renames
// it over `path` and fsyncs the directory, so a crash or SIGKILL at any moment leaves either
// the previous `path` or the complete new one. Throws RuntimeError naming the file on failure.
void write_file_atomically(const std::string& path, std::string_view bytes);

// The whole file; RuntimeError "... not found" when it does not exist.
std::vector<char> read_whole_file(const std::string& path, std::string_view what);

// Removes temporary files a killed writer left behind in `directory`.
void remove_stale_temporaries(const std::string& directory);

}  // namespace ampt::checkpoint

// File handling the metric writers share: keeping an earlier run's files under a numbered name
// (metrics.jsonl → metrics.1.jsonl, tb/ → tb.1/) and rewriting a file a resumed run continues.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace ampt::log {

// Renames `path` (a file or a directory) to <stem>.<N><extension> with the lowest N not taken,
// logs "Kept the previous run's <what> as ...", and returns the new path. Throws RuntimeError
// when the rename fails.
std::filesystem::path keep_earlier_run(const std::filesystem::path& path, std::string_view what);

// Replaces `path` with `bytes` through a temporary in the same directory and a rename, so a
// process killed meanwhile leaves the old file or the new one, never half of either.
void replace_file(const std::filesystem::path& path, const std::string& bytes);

}  // namespace ampt::log

#include "ampt/data/input_files.h"

#include "ampt/core/errors.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <glob.h>

#include <algorithm>
#include <filesystem>
#include <system_error>

namespace ampt::data {

bool is_glob(const std::string& path) { return path.find_first_of("*?[") != std::string::npos; }

std::vector<std::string> glob_files(const std::string& pattern) {
  glob_t found{};
  const int rc = ::glob(pattern.c_str(), 0, nullptr, &found);
  std::vector<std::string> paths(found.gl_pathv, found.gl_pathv + (rc == 0 ? found.gl_pathc : 0));
  ::globfree(&found);
  if (rc != 0 && rc != GLOB_NOMATCH) {
    throw RuntimeError(pattern + ": cannot expand the pattern (glob error " + std::to_string(rc) + ")");
  }
  return paths;
}

std::vector<std::string> expand(const std::string& path) {
  if (!is_glob(path)) return {path};
  auto paths = glob_files(path);
  if (paths.empty()) throw RuntimeError(path + ": no file matches");
  return paths;
}

std::vector<std::string> document_files(const std::string& path,
                                        const std::vector<std::string>& extensions) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (!fs::is_directory(path, error)) return expand(path);
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(path, error)) {
    std::error_code not_regular;  // a dangling link is skipped, not an error
    if (std::ranges::find(extensions, entry.path().extension().string()) != extensions.end() &&
        entry.is_regular_file(not_regular)) {
      files.push_back(entry.path().string());
    }
  }
  if (error) throw RuntimeError(fmt::format("{}: cannot list the directory: {}", path, error.message()));
  if (files.empty()) {
    throw RuntimeError(fmt::format("{}: no *{} file in the directory", path,
                                   fmt::join(extensions, " or *")));
  }
  std::ranges::sort(files);
  return files;
}

}  // namespace ampt::data

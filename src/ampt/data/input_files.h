// The files a dataset path names: a file, a glob (matches sorted), or a directory.
#pragma once

#include <string>
#include <vector>

namespace ampt::data {

bool is_glob(const std::string& path);

// The files matching a glob(3) pattern, sorted; none is an empty list.
std::vector<std::string> glob_files(const std::string& pattern);

// A plain path as it is (opening it reports it missing), a glob's matches (none: RuntimeError).
std::vector<std::string> expand(const std::string& path);

// expand(), except that a directory gives its files with one of `extensions` (".txt"), sorted,
// not looking into subdirectories; a directory without one is a RuntimeError.
std::vector<std::string> document_files(const std::string& path,
                                        const std::vector<std::string>& extensions);

}  // namespace ampt::data

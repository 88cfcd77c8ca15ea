// Whether the Python references a test compares with are installed, read from the virtualenv's
// site-packages rather than by importing them: a Python process per check took about a second,
// and a test run made some fifty. A package present but broken fails the test that runs it.
#pragma once

#include <filesystem>
#include <sstream>
#include <string>
#include <string_view>

namespace ampt::test {

// `modules`: names as an import statement lists them, "transformers, peft".
inline bool python_has(std::string_view modules) {
  namespace fs = std::filesystem;
  const fs::path lib = fs::path(AMPT_PYTHON).parent_path().parent_path() / "lib";
  std::error_code ec;
  if (!fs::exists(AMPT_PYTHON) || !fs::is_directory(lib, ec)) return false;
  std::istringstream names{std::string(modules)};
  for (std::string name; std::getline(names, name, ',');) {
    name.erase(0, name.find_first_not_of(' '));
    name.erase(name.find_last_not_of(' ') + 1);
    bool found = false;
    for (const auto& version : fs::directory_iterator(lib, ec)) {
      const auto site = version.path() / "site-packages";
      found = found || fs::exists(site / name / "__init__.py") || fs::exists(site / (name + ".py"));
    }
    if (!found) return false;
  }
  return true;
}

}  // namespace ampt::test

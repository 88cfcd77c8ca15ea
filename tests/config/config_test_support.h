// Helpers shared by the config tests: temporary YAML files and capturing UsageError messages.
#pragma once

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "ampt/config/catalog.h"
#include "ampt/config/resolve.h"
#include "ampt/core/errors.h"

namespace ampt::config::testing {

// A YAML file in the temp directory, removed when the test ends. Names include the pid because
// ctest runs test cases as parallel processes.
class TempYaml {
 public:
  explicit TempYaml(std::string_view contents) {
    static int counter = 0;
    path_ =
        std::filesystem::temp_directory_path() / ("ampt_config_test_" + std::to_string(::getpid()) +
                                                  "_" + std::to_string(counter++) + ".yaml");
    std::ofstream(path_) << contents;
  }
  ~TempYaml() { std::filesystem::remove(path_); }
  TempYaml(const TempYaml&) = delete;
  TempYaml& operator=(const TempYaml&) = delete;

  std::string path() const { return path_.string(); }
  // "path:line", as file sources and error messages spell it.
  std::string at(int line) const { return path() + ":" + std::to_string(line); }

 private:
  std::filesystem::path path_;
};

using Env = std::map<std::string, std::string>;

// The config tests' stand-in for models::catalog() (tests/models/catalog_test.cpp tests that
// one): a few model names, every pretrained model a "gpt", no adapters.
inline const Catalog& test_catalog() {
  static const Catalog catalog{
      {"mlp", "cnn", "gpt", "gpt-tiny", "gpt2-124m"},
      [](const std::string&, const std::string&) { return std::string("gpt"); },
      [](const std::string&) { return std::optional<AdapterSettings>(); }};
  return catalog;
}

// resolve() against test_catalog().
inline Resolved resolve(const std::vector<std::string>& args, const Env& env = {}) {
  return ampt::config::resolve(args, env, test_catalog());
}

// Resolves with only `yaml` as the config file (given by --config) plus extra arguments.
inline Resolved resolve_yaml(const TempYaml& yaml, std::vector<std::string> args = {},
                             const Env& env = {}) {
  args.insert(args.begin(), {"--config", yaml.path()});
  return resolve(args, env);
}

// The message of the UsageError `action` throws; fails the test if it throws nothing.
template <class Action>
std::string usage_error(Action&& action) {
  try {
    action();
  } catch (const UsageError& error) {
    return error.what();
  }
  FAIL("expected a UsageError");
  return {};
}

inline std::string resolve_error(const std::vector<std::string>& args, const Env& env = {}) {
  return usage_error([&] { resolve(args, env); });
}

// The error from resolving a file holding `contents`, with its path replaced by "FILE" so
// expectations can be written as "unknown key 'x' in FILE:3".
inline std::string yaml_error(std::string_view contents) {
  TempYaml yaml(contents);
  std::string message = usage_error([&] { resolve_yaml(yaml); });
  for (auto at = message.find(yaml.path()); at != std::string::npos;
       at = message.find(yaml.path())) {
    message.replace(at, yaml.path().size(), "FILE");
  }
  return message;
}

}  // namespace ampt::config::testing

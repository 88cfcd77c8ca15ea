// How each input (command line, environment, YAML file) becomes a list of settings to apply.
// Internal to the config module: resolve() is the public entry point.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ampt/config/option.h"

namespace ampt::config {

// "Set `option` to `text`", not yet parsed, with where it was written.
struct Assignment {
  const Option* option;
  std::string text;
  Source source;
};

// Command-line arguments after the subcommand. Throws UsageError for unknown flags, stray
// arguments and missing values; values themselves are checked when applied.
std::vector<Assignment> read_flags(const std::vector<std::string>& args);

// Every AMPT_* variable must be an option's env name; other variables are ignored.
std::vector<Assignment> read_env(const std::map<std::string, std::string>& env);

// Reads and validates a YAML file (values included, aliases resolved); throws UsageError
// naming path:line for anything wrong.
std::vector<Assignment> read_yaml_file(const std::string& path);

}  // namespace ampt::config

// How each input (command line, environment, YAML file) becomes a list of settings to apply.
// Internal to the config module: resolve() is the public entry point.
#pragma once

#include <functional>
#include <map>
#include <string_view>
#include <string>
#include <vector>

#include "ampt/config/option.h"

namespace cxxopts {
class Options;
class ParseResult;
}  // namespace cxxopts

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

// `args` parsed by `cli` (which allows unrecognised options, the caller's to report); a flag
// without its value, or what cxxopts cannot read, is one UsageError.
cxxopts::ParseResult parse_arguments(cxxopts::Options& cli, const std::vector<std::string>& args);

// "--batch_size", "--use_amp", ...: every flag a training command takes, for suggestions.
std::vector<std::string> training_flag_spellings();
// "unknown flag '--bach_size' (did you mean '--batch_size'?)", the suggestion from `known`.
UsageError unknown_flag(const std::string& arg, const std::vector<std::string>& known);
// "unexpected argument 'false'", with how to write it when it follows a switch (`--debug false`,
// an argparse habit, is `--debug` and a stray "false" to cxxopts).
UsageError unexpected_argument(const std::string& arg, const std::vector<std::string>& args,
                               const std::function<bool(std::string_view)>& is_switch);

// Every AMPT_* variable must be an option's env name; other variables are ignored.
std::vector<Assignment> read_env(const std::map<std::string, std::string>& env);

// Reads and validates a YAML file (values included, aliases resolved); throws UsageError
// naming path:line for anything wrong.
std::vector<Assignment> read_yaml_file(const std::string& path);

}  // namespace ampt::config

// The subcommands of `ampt`, as one table: what app/main.cpp dispatches on and what
// `ampt --help` lists. Each command writes its results to stdout and returns an exit status;
// errors are thrown (core/errors.h) and turned into statuses by main.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "ampt/config/option.h"

namespace ampt::commands {

// The process environment: commands that resolve a training configuration read AMPT_* from it.
using Environment = std::map<std::string, std::string>;

// Exit statuses shared by every command (main maps exceptions onto the first two).
constexpr int kRuntimeError = 1;
constexpr int kUsageError = 2;

struct Command {
  std::string_view name;
  std::string_view summary;  // one line for `ampt --help`
  std::function<std::string()> help;  // `ampt <name> --help`
  // The arguments after the command's name.
  std::function<int(const std::vector<std::string>& args, const Environment& env)> run;
  // Its own flags, for the reference (docs/options.md); null when it has none.
  std::function<std::vector<config::FlagReference>()> flags;
  bool training_options = false;  // every training option applies as well
};

// In the order `ampt --help` lists them.
const std::vector<Command>& all();

}  // namespace ampt::commands

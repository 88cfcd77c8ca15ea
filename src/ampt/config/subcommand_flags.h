// Flags that a subcommand (compare, recommend) takes on top of the training options: they are
// taken out of the argument list before the rest goes to resolve(), so every training flag,
// YAML file and AMPT_* variable keeps working unchanged under those subcommands.
#pragma once

#include "ampt/config/catalog.h"
#include "ampt/config/values.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ampt::config {

struct SubcommandFlag {
  std::string name;           // without "--"
  std::string metavar;        // "N", "LIST"
  std::string default_value;  // as text; shown in the help
  std::string help;
};

struct SplitArgs {
  std::map<std::string, std::string> values;  // every flag of the subcommand: given or default
  std::vector<std::string> rest;              // everything else, in order, for resolve()
};

// Takes `--name VALUE` and `--name=VALUE` of each flag out of `args`. Throws UsageError when one
// is given twice or has no value.
SplitArgs split_subcommand_flags(const std::vector<std::string>& args,
                                 const std::vector<SubcommandFlag>& flags);

// The subcommand flag `name`'s value as a number (an integer for subcommand_integer) in `range`.
// Throws UsageError "invalid value 'x' for --name: expected a number > 0" otherwise.
double subcommand_number(const std::string& name, const std::string& text, const Range& range);
int64_t subcommand_integer(const std::string& name, const std::string& text, const Range& range);

// "Usage: ampt compare [FLAGS] [TRAINING FLAGS]" with the subcommand's own flags, followed by
// every training option (help_text).
std::string subcommand_help(const std::string& program_and_subcommand, const std::string& summary,
                            const std::vector<SubcommandFlag>& flags, const Catalog& catalog);

}  // namespace ampt::config

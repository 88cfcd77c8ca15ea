// `ampt config`: the configuration a run with these arguments would use, and where each value
// came from.
#pragma once

#include "ampt/commands/command.h"
#include "ampt/config/option.h"

#include <vector>

namespace ampt::commands {

// Its own flags, for help and the reference (docs/options.md).
std::vector<config::FlagReference> config_flag_references();
std::string config_help();
int run_config(const std::vector<std::string>& args, const Environment& env);

}  // namespace ampt::commands

// `ampt config`: the configuration a run with these arguments would use, and where each value
// came from.
#pragma once

#include "ampt/commands/command.h"

namespace ampt::commands {

std::string config_help();
int run_config(const std::vector<std::string>& args, const Environment& env);

}  // namespace ampt::commands

// `ampt recommend`: memory per precision and opt level for a model on a GPU of a given size, and
// the setup to train it with (models/memory_plan.h).
#pragma once

#include "ampt/commands/command.h"
#include "ampt/config/option.h"

#include <vector>

#include <string>
#include <vector>

namespace ampt::commands {

// Its own flags, for help and the reference (docs/options.md).
std::vector<config::FlagReference> recommend_flag_references();
std::string recommend_help();

// `args` after `recommend`; prints the table and the recommendation. Throws UsageError for bad
// flags.
int run_recommend(const std::vector<std::string>& args, const Environment& env);

}  // namespace ampt::commands

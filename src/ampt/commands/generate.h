// `ampt generate`: a GPT (a checkpoint of ampt's, or a pretrained Hugging Face GPT-2) continues a
// prompt; the prompt and its continuation go to stdout as they come, everything else to stderr.
#pragma once

#include "ampt/commands/command.h"
#include "ampt/config/option.h"

#include <vector>

namespace ampt::commands {

// Its own flags, for help and the reference (docs/options.md).
std::vector<config::FlagReference> generate_flag_references();
std::string generate_help();
int run_generate(const std::vector<std::string>& args, const Environment& env);

}  // namespace ampt::commands

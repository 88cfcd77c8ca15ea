// `ampt generate`: a GPT (a checkpoint of ampt's, or a pretrained Hugging Face GPT-2) continues a
// prompt; the prompt and its continuation go to stdout as they come, everything else to stderr.
#pragma once

#include "ampt/commands/command.h"

namespace ampt::commands {

std::string generate_help();
int run_generate(const std::vector<std::string>& args, const Environment& env);

}  // namespace ampt::commands

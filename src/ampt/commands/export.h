// `ampt export`: a checkpoint's weights as a file the rest of the ecosystem reads.
#pragma once

#include "ampt/commands/command.h"
#include "ampt/config/option.h"

#include <vector>

namespace ampt::commands {

// `args` are the arguments after `export`: --checkpoint PATH --out FILE [--format safetensors]
// [--dtype fp32|bf16]. Prints what it wrote. Throws UsageError for bad arguments, RuntimeError
// for a bad checkpoint.
int run_export(const std::vector<std::string>& args, const Environment& env);

// Its own flags, for help and the reference (docs/options.md).
std::vector<config::FlagReference> export_flag_references();
std::string export_help();

}  // namespace ampt::commands

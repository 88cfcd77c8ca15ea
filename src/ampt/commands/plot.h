// `ampt plot RUN_DIR`: a picture of a run (finished, stopped or still running) from its
// metrics.jsonl, as run.svg.
#pragma once

#include "ampt/commands/command.h"
#include "ampt/config/option.h"

#include <vector>

namespace ampt::commands {

// `args` are the arguments after `plot`: RUN_DIR [--out FILE]. Prints the path it wrote.
// Throws UsageError for bad arguments, RuntimeError when the run has nothing to draw.
int run_plot(const std::vector<std::string>& args, const Environment& env);

// Its own flags, for help and the reference (docs/options.md).
std::vector<config::FlagReference> plot_flag_references();
std::string plot_help();

}  // namespace ampt::commands

// `ampt compare`: the same configuration trained for N steps in each numeric format (fp32, bf16,
// fp16, ...) from the same initial weights and data order, summarised in one table.
#pragma once

#include "ampt/commands/command.h"
#include "ampt/config/option.h"

#include <vector>

#include <string>
#include <vector>

namespace ampt::commands {

// A format compare can run: its name in --formats and the --mixed_precision a training run gets.
// New formats (fp8) are one more entry in compare_formats().
struct CompareFormat {
  std::string name;
  std::string mixed_precision;
};
const std::vector<CompareFormat>& compare_formats();

// Its own flags, for help and the reference (docs/options.md).
std::vector<config::FlagReference> compare_flag_references();
std::string compare_help();

// `args` after `compare`; `env` the process environment (only AMPT_* is read, by config). Runs one
// child `ampt train` per format, prints the table and writes compare.{md,csv,json} to output_dir.
// Returns the exit status: 0, or 1 when a format's run failed (its row says why). Throws
// UsageError for bad flags before anything runs.
int run_compare(const std::vector<std::string>& args, const Environment& env);

}  // namespace ampt::commands

// `ampt tokenize`: text files to an llm.c token shard, nanoGPT's prepare.py natively.
#pragma once

#include "ampt/commands/command.h"
#include "ampt/config/option.h"

#include <vector>

namespace ampt::commands {

// `args` are the arguments after `tokenize`: --tokenizer PATH --out FILE [--text_field NAME]
// [--threads N] INPUT... (files, directories of *.txt and *.jsonl, globs). Prints what it wrote.
// Throws UsageError for bad arguments, RuntimeError for unreadable inputs or tokenizer.
int run_tokenize(const std::vector<std::string>& args, const Environment& env);

// Its own flags, for help and the reference (docs/options.md).
std::vector<config::FlagReference> tokenize_flag_references();
std::string tokenize_help();

}  // namespace ampt::commands

// `ampt tokenize`: text files to an llm.c token shard, nanoGPT's prepare.py natively.
#pragma once

#include "ampt/commands/command.h"

namespace ampt::commands {

// `args` are the arguments after `tokenize`: --tokenizer PATH --out FILE [--text_field NAME]
// [--threads N] INPUT... (files, directories of *.txt and *.jsonl, globs). Prints what it wrote.
// Throws UsageError for bad arguments, RuntimeError for unreadable inputs or tokenizer.
int run_tokenize(const std::vector<std::string>& args, const Environment& env);

std::string tokenize_help();

}  // namespace ampt::commands

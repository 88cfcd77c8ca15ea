// Text corpora → token ids for training (what `ampt tokenize` runs): every document is preceded
// by <|endoftext|>, as in GPT-2's training data and llm.c's token shards.
#pragma once

#include "ampt/text/tokenizer.h"

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace ampt::text {

struct TokenizeFilesOptions {
  int threads = 0;  // 0: one per core
  SpecialTokens specials = SpecialTokens::as_text;
};

struct TokenizeFilesStats {
  int64_t documents = 0;
  int64_t bytes = 0;   // of document text
  int64_t tokens = 0;  // <|endoftext|> separators included
};

// A file ending in .jsonl holds one document per non-empty line: the string field "text" of a
// JSON object. Any other file is one document. `sink` receives the ids in order, some documents
// at a time. Throws RuntimeError naming the file (and line) that cannot be read.
TokenizeFilesStats tokenize_files(const Tokenizer& tokenizer, const std::vector<std::string>& paths,
                                  const TokenizeFilesOptions& options,
                                  const std::function<void(std::span<const int32_t>)>& sink);

}  // namespace ampt::text

// tiktoken's rank files (*.tiktoken): one "base64(token bytes) rank" line per token, the rank
// being the id. Merges are implied: any two adjacent tokens whose bytes join into a token merge,
// at that token's rank, exactly as tiktoken merges.
#pragma once

#include "ampt/text/vocabulary.h"

#include <string>

namespace ampt::text {

// The file names no special tokens: <|endoftext|> gets the id after the last rank, as in GPT-2's
// r50k/gpt2 encodings (50256). The pre-tokenizer is GPT-2's whatever the file, so only files of
// that family (gpt2, r50k_base, p50k_base) give tiktoken's ids. Throws RuntimeError naming the
// file and line: bad base64, a missing or non-numeric rank, a token or rank given twice, gaps.
Vocabulary read_tiktoken(const std::string& path);

}  // namespace ampt::text

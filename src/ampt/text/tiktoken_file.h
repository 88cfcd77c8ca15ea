// tiktoken's rank files (*.tiktoken): one "base64(token bytes) rank" line per token, the rank
// being the id. Merges are implied: any two adjacent tokens whose bytes join into a token merge,
// at that token's rank, exactly as tiktoken merges.
#pragma once

#include "ampt/text/vocabulary.h"

#include <string>

namespace ampt::text {

// A rank file names neither its pattern nor its special tokens (tiktoken keeps them in code), so
// they follow from the number of ranks, each a known encoding's, and any other is refused by
// name rather than given a pattern its ids were not trained with:
//   at most 50281 (gpt2, r50k_base, p50k_base; small test files): GPT-2's pattern, and
//     <|endoftext|> after the last rank (50256 for gpt2);
//   151643 (Qwen's qwen.tiktoken): Qwen2's pattern, and Qwen's special tokens from 151643 on:
//     <|endoftext|>, <|im_start|>, <|im_end|>, <|extra_0|> .. <|extra_204|>.
// A piece that is a whole token is that token (Vocabulary::ignore_merges), as in tiktoken.
// Throws RuntimeError naming the file (and line): bad base64, a missing or non-numeric rank, a
// token or rank given twice, gaps, an unknown number of ranks.
Vocabulary read_tiktoken(const std::string& path);

}  // namespace ampt::text

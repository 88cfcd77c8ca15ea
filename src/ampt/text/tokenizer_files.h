// Finds and reads a byte-level BPE tokenizer (GPT-2's, Llama-3's, Qwen2's) in any of the formats
// people have it in.
#pragma once

#include "ampt/text/tokenizer.h"

#include <string>

namespace ampt::text {

// `path` is a directory holding tokenizer.json, or vocab.json and merges.txt, or one *.tiktoken
// file (looked for in that order); or one such file (vocab.json or merges.txt finds its partner
// beside it). Another file name is read as tokenizer.json when it starts with '{', else as a
// tiktoken file. A tokenizer_config.json beside the file sets BOS and EOS (tokenizer_config.h).
// Throws RuntimeError, one line naming the file and what is wrong.
Tokenizer load_tokenizer(const std::string& path);

// What load_tokenizer reads, before it is checked and built into a Tokenizer.
Vocabulary load_vocabulary(const std::string& path);

}  // namespace ampt::text

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

// The files load_tokenizer reads for `path`, found as it finds them (it throws the same errors).
struct TokenizerSource {
  enum class Format { tokenizer_json, vocab_and_merges, tiktoken };
  Format format = Format::tokenizer_json;
  std::string file;    // the tokenizer.json (whatever its name), vocab.json or rank file
  std::string merges;  // merges.txt, with vocab_and_merges
  std::string config;  // the tokenizer_config.json beside `file`; empty for none
};
TokenizerSource locate_tokenizer(const std::string& path);

// Whether directory `dir` holds a tokenizer's files (tokenizer.json, vocab.json or a *.tiktoken
// file): a model directory without them is a bare model.
bool holds_tokenizer(const std::string& dir);

}  // namespace ampt::text

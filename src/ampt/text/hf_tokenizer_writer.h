// Writes a vocabulary as Hugging Face's GPT-2 tokenizer files (vocab.json, merges.txt and the
// small configs AutoTokenizer reads), whatever format it was read from: a model handed back to
// Hugging Face takes its tokenizer along.
#pragma once

#include "ampt/text/vocabulary.h"

#include <cstdint>
#include <string>

namespace ampt::text {

// Writes vocab.json, merges.txt, tokenizer_config.json and special_tokens_map.json into the
// existing directory `dir`. merges.txt holds one merge per token, in rank order: the two tokens
// that BPE, applying only the lower ranks, leaves of the token's bytes (a tiktoken file implies
// several pairs per token; this is the one that BPE uses). Only a GPT-2 pre-tokenizer can be
// written so (Llama-3's and Qwen2's need tokenizer.json's Split). Throws RuntimeError naming
// vocabulary.source for another pre-tokenizer or a token BPE cannot build, and the file for a
// failed write.
void write_hf_tokenizer(const Vocabulary& vocabulary, const std::string& dir,
                        int64_t model_max_length);

}  // namespace ampt::text

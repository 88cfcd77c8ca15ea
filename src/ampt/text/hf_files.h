// Hugging Face's GPT-2 tokenizer files: tokenizer.json (model BPE, ByteLevel pre-tokenizer), or
// the older vocab.json + merges.txt pair. Tokens are written in GPT-2's byte-level alphabet
// (bytes_to_unicode: each byte one printable character, "Ġ" for a space).
#pragma once

#include "ampt/text/vocabulary.h"

#include <string>

namespace ampt::text {

// Throws RuntimeError naming the file and what is wrong: invalid JSON, a model other than BPE,
// a normalizer or pre-tokenizer other than GPT-2's, a merge of unknown tokens, ids with gaps.
Vocabulary read_tokenizer_json(const std::string& path);

// GPT-2's release files: <|endoftext|>, a vocab.json entry, is the special token.
Vocabulary read_vocab_and_merges(const std::string& vocab_path, const std::string& merges_path);

}  // namespace ampt::text

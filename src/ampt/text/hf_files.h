// Hugging Face's byte-level BPE tokenizer files: tokenizer.json (GPT-2's, Llama-3's, Qwen2's with
// its NFC normalizer), or GPT-2's older vocab.json + merges.txt pair. Tokens are written
// in GPT-2's byte-level alphabet (bytes_to_unicode: each byte one printable character, "Ġ" for a
// space).
#pragma once

#include "ampt/text/vocabulary.h"

#include <string>

namespace ampt::text {

// Added tokens (special or not) may have ids past the model's vocab and become the special
// tokens; the BOS is the token a TemplateProcessing post_processor puts first. Throws
// RuntimeError naming the file and what is wrong: invalid JSON, a model other than BPE, any
// normalizer, a pre-tokenizer other than those of pretokenizer.h (a Split regex is compared
// exactly), a merge of unknown tokens, ids with gaps.
Vocabulary read_tokenizer_json(const std::string& path);

// GPT-2's release files: <|endoftext|>, a vocab.json entry, is the special token.
Vocabulary read_vocab_and_merges(const std::string& vocab_path, const std::string& merges_path);

}  // namespace ampt::text

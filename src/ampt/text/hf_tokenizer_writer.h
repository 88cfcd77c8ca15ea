// A byte-level vocabulary as Hugging Face's tokenizer.json, whatever format it was read from: a
// model handed back to Hugging Face takes along the tokenizer it was trained with, and a tiktoken
// rank file is no format transformers reads.
#pragma once

#include "ampt/text/vocabulary.h"

#include <string>

namespace ampt::text {

// The tokenizer.json that transformers' TikTokenConverter writes for a rank file, and that
// Hugging Face tokenizers encode with the ids ampt gives: the pre-tokenizer Sequence [Split
// (the vocabulary's regex, Isolated), ByteLevel (use_regex false)], NFC first where the
// vocabulary normalizes; a BPE model whose vocab holds the tokens in GPT-2's byte alphabet (a
// special token among them as it is) and whose merges are every merge in rank order (ties by
// the ids of the pair, as TikTokenConverter sorts them), ignore_merges as the vocabulary has it;
// the special tokens past the last ordinary one as added tokens; a TemplateProcessing that puts
// the vocabulary's BOS first where it has one; ByteLevel decoder. Throws RuntimeError naming
// vocabulary.source for a SentencePiece vocabulary (copied as its own tokenizer.json, never
// written) and for two tokens written alike.
std::string tokenizer_json(const Vocabulary& vocabulary);

}  // namespace ampt::text

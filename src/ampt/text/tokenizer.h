// BPE tokenizers, byte-level (GPT-2's, Llama-3's, Qwen2's; the vocabulary says which
// pre-tokenizer) and SentencePiece's as Hugging Face converts it (Llama-2's, Mistral's): text →
// token ids → text, with the ids tiktoken and Hugging Face tokenizers give. Immutable once built, so one instance serves any number of threads.
#pragma once

#include "ampt/text/vocabulary.h"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ampt::text {

// What to do with the text of a special token such as <|endoftext|>: encode it like any other
// text (the default, as tiktoken's encode_ordinary), or give its one id (as tiktoken's
// allowed_special="all" and Hugging Face's tokenizers always do).
enum class SpecialTokens { as_text, allowed };

class Tokenizer {
 public:
  // Throws RuntimeError naming vocabulary.source when the vocabulary cannot be a byte-level BPE
  // tokenizer: no token for some byte, a merge outside the ids, no end-of-text token (the
  // vocabulary's eos, else the special token <|endoftext|>, else <|end_of_text|>).
  explicit Tokenizer(Vocabulary vocabulary);

  // Ill-formed UTF-8 is read as Python's bytes.decode("utf-8", "replace") reads it (each ill-formed
  // subpart is U+FFFD), so decode(encode(x)) == x for well-formed x.
  std::vector<int32_t> encode(std::string_view text,
                              SpecialTokens specials = SpecialTokens::as_text) const;
  // Appends to `out` instead.
  void encode_append(std::string_view text, SpecialTokens specials, std::vector<int32_t>& out) const;
  // The same ids as encode(), worked out by `threads` threads (0: one per core) on pieces of the
  // text cut where the pre-tokenizer would cut whatever surrounds them.
  std::vector<int32_t> encode_parallel(std::string_view text, int threads,
                                       SpecialTokens specials = SpecialTokens::as_text) const;
  // encode() of each text, shared out across `threads` threads (0: one per core).
  std::vector<std::vector<int32_t>> encode_batch(std::span<const std::string_view> texts,
                                                 int threads,
                                                 SpecialTokens specials = SpecialTokens::as_text) const;

  // The bytes of the tokens, special tokens as their text. A subset of a text's ids may end in
  // the middle of a UTF-8 character: the bytes are returned as they are. Throws RuntimeError for
  // an id outside the vocabulary.
  std::string decode(std::span<const int32_t> ids) const;

  // The byte offset in `text` where the text of each of its `ids` (encode(text, ...)) ends: how a
  // rendered chat's character spans become tokens. A SentencePiece "▁" that the encoding put
  // before a text (Metaspace's prepend) stands for no byte of it. Text that normalization
  // changed (NFC) is counted in its normalized bytes.
  std::vector<std::size_t> token_ends(std::span<const int32_t> ids, std::string_view text) const;
  int32_t vocab_size() const;
  // The token that ends a text (EOS): GPT-2's <|endoftext|>, or tokenizer_config.json's
  // eos_token (Llama-3's <|end_of_text|>, Qwen2-Instruct's <|im_end|>). Generation stops at it
  // and padding uses it.
  int32_t eot_id() const;
  // The token the tokenizer puts before every text (BOS), as Hugging Face's tokenizer(text)
  // does: Llama-3's <|begin_of_text|>; -1 for none (GPT-2, Qwen2).
  int32_t bos_id() const;
  // The id of the special token whose text is `text` (<|im_start|>), -1 for none: what tells
  // which chat template the tokenizer was made for.
  int32_t special_id(std::string_view text) const;
  bool is_special(int32_t id) const;
  PreTokenizer pre_tokenizer() const;
  // "GPT-2 BPE", "Llama-3 BPE", "Qwen2 BPE": what summaries call it.
  std::string kind() const;
  const std::string& source() const;
  // A hash of the tokens, merges, special tokens, pre-tokenizer and BOS/EOS: what decides the
  // ids, whatever file they were read from: the key of a cache of tokenized text.
  uint64_t fingerprint() const;

 private:
  struct Model;
  // `input_start`: `text` begins the input (not a parallel chunk after the first).
  void encode_valid(std::string_view text, SpecialTokens specials, bool input_start,
                    std::vector<int32_t>& out) const;
  // A text between special tokens; `input_start` and `after_special` decide a SentencePiece
  // vocabulary's "▁" before it.
  void encode_ordinary(std::string_view text, bool input_start, bool after_special,
                       std::vector<int32_t>& out) const;
  // SentencePiece's normalized text: spaces as "▁", and one before it when `prefixed` (and the
  // vocabulary's Metaspace allows).
  std::string metaspace_text(std::string_view raw, bool prefixed) const;
  std::vector<std::string_view> parallel_chunks(std::string_view text, int chunks,
                                                SpecialTokens specials) const;

  std::shared_ptr<const Model> model_;
};

// The number of threads `threads` asks for: itself when positive, else one per core.
int resolve_threads(int threads);

}  // namespace ampt::text

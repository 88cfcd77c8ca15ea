// What a tokenizer file holds once read, whatever its format: every token's bytes, the merges
// BPE may apply, the special tokens, how text is cut into pieces before BPE, and the ids that
// frame a text. Loaders produce it; Tokenizer checks and uses it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ampt::text {

struct Merge {
  int32_t left = 0;    // token ids of the adjacent pair
  int32_t right = 0;
  int32_t rank = 0;    // lower merges first
  int32_t result = 0;  // the id of the pair's concatenation
};

// A pair of token ids as one key for a merge lookup: the left id high, the right low.
inline uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

// The pre-tokenizer patterns ampt implements (pretokenizer.h has the regexes). They differ in
// the ids they give for the same tokens, so a vocabulary must say which one it was trained with.
enum class PreTokenizer : uint8_t {
  gpt2,    // GPT-2, r50k_base, p50k_base
  llama3,  // Llama-3: case-insensitive contractions, a letter run takes one leading mark, digits in threes
  qwen2,   // Qwen, Qwen2, Qwen2.5: Llama-3's with single digits
  // SentencePiece's BPE as Hugging Face converts it (Llama-2's, Mistral's): no regex; spaces are
  // "▁", and a word is a run of "▁" and what follows up to the next "▁" (Vocabulary::metaspace).
  sentencepiece,
};

// How a sentencepiece vocabulary puts "▁" before a text: the normalizer Prepend does it before
// every text between special tokens; the pre_tokenizer Metaspace (prepend_scheme first or always)
// before the input's first text or every one, and not where it already starts with "▁".
struct Metaspace {
  bool every_text = false;
  bool unless_space = false;
};

struct Vocabulary {
  std::string source;               // the file(s) it came from, for errors
  std::vector<std::string> tokens;  // id → bytes, ids 0..size-1
  std::vector<Merge> merges;
  std::vector<int32_t> special_ids;  // matched as whole strings before BPE when allowed
  PreTokenizer pre_tokenizer = PreTokenizer::gpt2;
  // A piece that is a whole (non-special) token is that token, merges or not: what tiktoken does,
  // and Hugging Face's BPE with ignore_merges (Llama-3's tokenizer.json).
  bool ignore_merges = false;
  // Texts are put in Unicode NFC before the pre-tokenizer (Qwen2's tokenizer.json normalizer).
  bool nfc = false;
  // The token the tokenizer puts before a text (Llama-3's <|begin_of_text|>), -1 for none; and
  // the one that ends a text, -1 to let Tokenizer pick <|endoftext|> or <|end_of_text|>.
  int32_t bos = -1;
  int32_t eos = -1;
  // sentencepiece: how "▁" goes before a text, and each byte's <0xXX> token (tokens[] holds the
  // byte itself), which stands for a character that has no token; empty for none.
  Metaspace metaspace;
  std::vector<int32_t> byte_fallback;
};

}  // namespace ampt::text

// The tokenizer a model goes to Hugging Face with: the one its run trained with, as files that
// AutoTokenizer.from_pretrained loads and that give the ids ampt gave.
#pragma once

#include "ampt/text/vocabulary.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ampt::hf {

struct ExportTokenizer {
  std::string path;  // what the run (or export's --tokenizer) named: a directory or a file
  text::Vocabulary vocabulary;
  // The tokens that begin and end a text as the run's Tokenizer has them (text/tokenizer.h);
  // bos -1 for none.
  int32_t bos = -1;
  int32_t eos = -1;
};

// The tokenizer at `path` (text/tokenizer_files.h), checked as a run's tokenizer is; a
// UsageError when it has more tokens than the model's `model_vocab` rows.
ExportTokenizer read_export_tokenizer(const std::string& path, int64_t model_vocab);

// Writes `tokenizer`'s files into the directory `dir` and returns their names.
//   tokenizer.json (whatever the file's name): copied, with the files of its directory that
//     AutoTokenizer reads beside it (special_tokens_map.json, added_tokens.json,
//     chat_template.jinja/.json, vocab.json, merges.txt, tokenizer.model);
//   vocab.json + merges.txt: copied, with the same companions;
//   a tiktoken rank file, which transformers does not load: written as tokenizer.json
//     (text/hf_tokenizer_writer.h), and its directory's chat templates copied.
// Copies are byte for byte, tokenizer_config.json's too, except that one that names no
// tokenizer_class gains one ("PreTrainedTokenizerFast", or "GPT2Tokenizer" for vocab.json +
// merges.txt) and one that is absent (or belongs to a rank file) is written with that class, the
// BOS and EOS ampt reads and `model_max_length`: without a class, transformers 5 picks it by
// config.json's model_type, and a model-specific class rebuilds the normalizer and pre-tokenizer
// its own way (a Qwen2-style file under a GPT-2 config loses its NFC). Throws RuntimeError naming
// the file that cannot be copied or written.
std::vector<std::string> write_tokenizer_files(const ExportTokenizer& tokenizer, const std::string& dir,
                                               int64_t model_max_length);

// Whether write_tokenizer_files may write a file named `name`.
bool is_tokenizer_file(const std::string& name);

}  // namespace ampt::hf

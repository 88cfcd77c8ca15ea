// Text corpora → token ids for training (what `ampt tokenize` runs): every document is preceded
// by the EOS, <|endoftext|> for GPT-2 and Qwen2 as in GPT-2's training data and llm.c's token
// shards, and then by the BOS where the tokenizer adds one: a Llama-3 corpus reads
// "<|end_of_text|> <|begin_of_text|> doc <|end_of_text|> <|begin_of_text|> doc". So a document
// starts as Hugging Face's tokenizer(text) starts it, a packed stream ends each one with the EOS
// (generation stops there), and the data loader, which splits documents at the EOS and ends
// each unpacked example with it, sees "<|begin_of_text|> doc <|end_of_text|>".
#pragma once

#include "ampt/text/tokenizer.h"

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace ampt::text {

// How a file holds documents: a text file is one document; a record file one per record, the
// string field `text_field` of each: JSON Lines (a JSON object a non-empty line), or a Parquet or
// Arrow table (a row: text/record_files.h).
enum class InputFormat {
  by_extension,  // .jsonl files and tables (by their first bytes) are record files, the others text
  text,
  records,
};

// Whether `path` is read as a record file.
bool is_record_file(const std::string& path, InputFormat format);

// Input bytes read so far and in all (the files' sizes), reported as documents are done.
using InputProgress = std::function<void(int64_t done, int64_t total)>;

struct TokenizeFilesOptions {
  int threads = 0;  // 0: one per core
  SpecialTokens specials = SpecialTokens::as_text;
  InputFormat format = InputFormat::by_extension;
  std::string text_field = "text";
  InputProgress progress;  // may be empty
};

struct TokenizeFilesStats {
  int64_t documents = 0;
  int64_t bytes = 0;   // of document text
  int64_t tokens = 0;  // EOS and BOS before each document included
};

// Calls `document(text, done)` for every document of `paths` in order, `done` being the input
// bytes read up to its end. Throws RuntimeError naming the file (and line) that cannot be read.
void read_documents(const std::vector<std::string>& paths, InputFormat format,
                    const std::string& text_field,
                    const std::function<void(std::string text, int64_t done)>& document);

// The sum of the files' sizes (those that cannot be read count 0: reading them says why).
int64_t input_bytes(const std::vector<std::string>& paths);

// `sink` receives the ids in order, some documents at a time. Throws as read_documents.
TokenizeFilesStats tokenize_files(const Tokenizer& tokenizer, const std::vector<std::string>& paths,
                                  const TokenizeFilesOptions& options,
                                  const std::function<void(std::span<const int32_t>)>& sink);

}  // namespace ampt::text

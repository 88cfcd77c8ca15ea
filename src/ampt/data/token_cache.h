// Tokenized text kept for later runs: an llm.c shard per (tokenizer, inputs), so that a corpus is
// tokenized once, and again only when the tokenizer or an input changes.
#pragma once

#include "ampt/config/config.h"
#include "ampt/text/chat_template.h"
#include "ampt/text/tokenize_files.h"
#include "ampt/text/tokenizer.h"

#include <string>
#include <vector>

namespace ampt::data {

// Where a run keeps tokenized text (and what else is computed once from its data, such as
// --precompute_ref_logps's table): config.token_cache, or output_dir/token_cache.
std::string token_cache_dir(const config::Config& config);

struct CachedShard {
  std::string path;
  std::string mask;                   // its loss mask (instruction records); empty for documents
  bool reused = false;                // false: tokenized by this call
  text::TokenizeFilesStats written;   // when not reused
};

// The shard of `inputs` as write_text_shard (text_shard.h) makes it, found in `cache_dir` or
// written there now (the directory is created). Its name is `name` (made safe for a file name)
// and a hash of the tokenizer's fingerprint, the input format and text field, and each input's
// absolute path, size and modification time, and `chat`'s fields where it is given (instruction
// records, with a loss mask: write_text_shard). Throws RuntimeError naming an input that cannot
// be read or a directory that cannot be written.
CachedShard cached_text_shard(const text::Tokenizer& tokenizer,
                              const std::vector<std::string>& inputs,
                              const text::TokenizeFilesOptions& options,
                              const std::string& cache_dir, const std::string& name,
                              const text::ChatTemplate* chat = nullptr);

}  // namespace ampt::data

// Text files tokenized into one llm.c token shard: nanoGPT's prepare.py, natively. Each document
// is preceded by <|endoftext|>, and an <|endoftext|> written in a document stays text, so the
// separators are the shard's only <|endoftext|> ids and split it back into its documents.
#pragma once

#include "ampt/data/token_windows.h"
#include "ampt/text/tokenize_files.h"
#include "ampt/text/tokenizer.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ampt::data {

// `options.specials` is ignored: the separators must stay unambiguous (see above).
text::TokenizeFilesStats write_text_shard(const text::Tokenizer& tokenizer,
                                          const std::vector<std::string>& inputs,
                                          text::TokenizeFilesOptions options,
                                          const std::string& out);

// Throws RuntimeError naming the tokenizer when its ids do not fit a shard's uint16 tokens.
void check_fits_shard(const text::Tokenizer& tokenizer);

// How many times `id` occurs in the span: the documents of a shard, counting its separators.
int64_t count_token(const TokenSpan& span, int32_t id);

}  // namespace ampt::data

// Text files tokenized into one llm.c token shard: nanoGPT's prepare.py, natively. Each document
// is preceded by <|endoftext|>, and an <|endoftext|> written in a document stays text, so the
// separators are the shard's only <|endoftext|> ids and split it back into its documents.
#pragma once

#include "ampt/data/token_windows.h"
#include "ampt/text/chat_template.h"
#include "ampt/text/tokenize_files.h"
#include "ampt/text/tokenizer.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ampt::data {

// The shard holds uint16 ids when the tokenizer's vocab_size() fits them (GPT-2), else uint32
// (Llama 3, Qwen2): llm.c's two layouts (token_file_writer.h).
// `options.specials` is ignored: the separators must stay unambiguous (see above).
// With `chat`, the inputs are instruction records rendered by it (text/tokenize_chats.h): the
// examples follow one another without separators, and their loss mask is written beside the
// shard (loss_mask.h), before it, so that a shard on disk always has its mask.
text::TokenizeFilesStats write_text_shard(const text::Tokenizer& tokenizer,
                                          const std::vector<std::string>& inputs,
                                          text::TokenizeFilesOptions options,
                                          const std::string& out,
                                          const text::ChatTemplate* chat = nullptr);

// How many times `id` occurs in the span: the documents of a shard, counting its separators.
int64_t count_token(const TokenSpan& span, int32_t id);

}  // namespace ampt::data

// The loss mask of a token shard of instruction data, a file beside it (x.bin → x.mask): llm.c's
// 256-int32 header with magic 20261124, version 1 and the token count, then one byte per token:
// bit 0 the token is a completion or assistant token (scored as a target), bit 1 it starts an
// example (text/tokenize_chats.h). The examples are found by bit 1, not by an end-of-text id,
// since chat templates end turns with ids (<|eot_id|>, <|im_end|>) that may also be the EOS.
#pragma once

#include "ampt/data/document_examples.h"
#include "ampt/data/token_windows.h"

#include <cstddef>
#include <string>
#include <vector>

namespace ampt::data {

// x.bin → x.mask; a name not ending in .bin gets .mask added.
std::string loss_mask_path(const std::string& shard);

// The mask of `tokens` at `path`, mapped; throws RuntimeError naming the file when its layout is
// not the mask's or it counts another number of tokens than the shard.
TokenSpan open_loss_mask(const std::string& path, const TokenSpan& tokens);

// The examples of spans[span] by its mask: each runs from a start bit to the next. Throws
// RuntimeError naming the mask when it marks no start at all.
std::vector<Document> mask_examples(const TokenSpan& mask, std::size_t span);

}  // namespace ampt::data

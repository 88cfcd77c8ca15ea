// Instruction records (chat_record.h) tokenized through a chat template (chat_template.h) for
// training, with a loss mask: one byte per token saying whether the loss scores it and where an
// example starts. What `ampt tokenize` and the token cache run on prompt/completion and messages
// data; tokenize_files.h does the same for plain documents.
#pragma once

#include "ampt/text/chat_template.h"
#include "ampt/text/tokenize_files.h"
#include "ampt/text/tokenizer.h"

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace ampt::text {

// Bits of a token's mask byte.
inline constexpr uint8_t kScoredToken = 1;   // a completion or assistant token: a scored target
inline constexpr uint8_t kExampleStart = 2;  // the first token of an example

// Whether `paths` hold instruction records rather than documents: the first record of the first
// JSON Lines file says (is_chat_record); text files never do.
bool holds_chat_records(const std::vector<std::string>& paths, InputFormat format,
                        const std::string& text_field);

// Appends the ids and mask bytes of one example. Each piece of render_chat is encoded on its own,
// template text with its special tokens as their ids, contents as text (a "<|im_end|>" written in
// a content stays text), so the boundary between prompt and answer falls between tokens (as TRL
// tokenizes a prompt and its completion apart); the ids differ from the rendered string's
// encoded whole only where a content starts with whitespace that the pre-tokenizer would join to
// the template text before it.
void encode_chat(const Tokenizer& tokenizer, const ChatTemplate& chat, const std::vector<Turn>& turns,
                 std::vector<int32_t>& ids, std::vector<uint8_t>& mask);

using ChatSink = std::function<void(std::span<const int32_t> ids, std::span<const uint8_t> mask)>;

// Every record of `paths` (JSON Lines; another file is refused by name) as encode_chat makes it,
// in order, some examples at a time; options.text_field and .specials are not used. Throws
// RuntimeError "PATH: line N: ..." for a bad record (chat_turns) or a file that cannot be read.
TokenizeFilesStats tokenize_chats(const Tokenizer& tokenizer, const ChatTemplate& chat,
                                  const std::vector<std::string>& paths,
                                  const TokenizeFilesOptions& options, const ChatSink& sink);

}  // namespace ampt::text

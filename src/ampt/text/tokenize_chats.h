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
// Every token of a preference record's rejected example, which follows its chosen one.
inline constexpr uint8_t kRejectedExample = 4;

// What the first record of JSON Lines data says its preference records are: none (documents or
// instruction records), standard (strings) or conversational (lists of messages).
enum class PreferenceForm { none, standard, conversational };
PreferenceForm preference_form(const std::vector<std::string>& paths, InputFormat format);

// The template that renders the records of `paths`: `file` (--chat_template: a .jinja file, or
// a JSON one) where given, else the tokenizer's own Jinja template (tokenizer_jinja_chat), else
// a built-in one (builtin_chat_template); `kwargs` (--chat_template_kwargs, a JSON object) go to
// a Jinja template. Standard preference records are rendered plain, as TRL trains on them (a
// `file` or `kwargs` is then refused: UsageError naming `data`, as are kwargs without a Jinja
// template).
ChatTemplate records_template(const std::vector<std::string>& paths, InputFormat format,
                              const Tokenizer& tokenizer, const std::string& file,
                              const std::string& data, const std::string& kwargs = "");

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

// Every record of `paths` (JSON Lines; another file is refused by name) as encode_chat makes it
// (a Jinja template's: the rendered chat encoded whole, special tokens recognised, and the tokens
// of each assistant turn's span scored, render_jinja_chat), in order, some examples at a time;
// options.text_field and .specials are not used. The first record decides the records' shape
// (chat_record.h). Preference
// records (chat_record.h), as the first record decides, become two examples each, chosen then
// rejected (kRejectedExample). Throws RuntimeError "PATH: line N: ..." for a bad record
// (chat_turns, preference_turns), one of another kind or form than the first, or a file that
// cannot be read.
TokenizeFilesStats tokenize_chats(const Tokenizer& tokenizer, const ChatTemplate& chat,
                                  const std::vector<std::string>& paths,
                                  const TokenizeFilesOptions& options, const ChatSink& sink);

}  // namespace ampt::text

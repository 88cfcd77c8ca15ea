// The prompts of online RL (GRPO), read from JSON Lines as TRL's GRPOTrainer takes them: each
// record a "prompt" (a string, or a list of messages) beside the fields its rewards read
// ("answer", "solution", ...). The first record decides the form, as elsewhere; a standard
// prompt is its text as it is (the BOS first where the tokenizer has one, as TRL's tokenizer call
// adds it), a conversational one is rendered by the chat template with the generation prompt
// after it (apply_chat_template(add_generation_prompt=True)), so that the model's sampled
// completion is the assistant's turn.
#pragma once

#include "ampt/core/json_reader.h"
#include "ampt/text/chat_record.h"
#include "ampt/text/chat_template.h"
#include "ampt/text/tokenizer.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ampt::text {

struct PromptRecord {
  std::vector<int32_t> ids;  // the prompt's tokens, the generation prompt last
  std::string text;          // the prompt as rendered (what completions.jsonl shows)
  JsonValue record;          // the whole record: the fields rewards read, the prompt as written
  std::string place;         // "PATH: line N": what an error about the record names
};

struct PromptRecords {
  PromptForm form = PromptForm::standard;
  std::vector<PromptRecord> records;
  // Conversational prompts: the special token that ends the assistant's turn under the template
  // (ChatML's <|im_end|>, Llama-3's <|eot_id|>, Gemma's <end_of_turn>), where the template puts
  // one after the turn's content; a completion ends there as at the tokenizer's EOS.
  std::optional<int32_t> end_of_turn;
};

// The special token that ends an assistant's turn under `chat`: the first one after the content
// in a one-exchange chat (a Jinja template's rendering, a built-in template's assistant suffix);
// none where no special token follows the content.
std::optional<int32_t> end_of_turn_token(const Tokenizer& tokenizer, const ChatTemplate& chat);

// Every record of `paths` (JSON Lines), in order; `chat` renders conversational prompts (a Jinja
// template's text encoded whole, its special tokens recognised; a built-in template's pieces
// with their contents as plain text, as the instruction data encodes them). Throws RuntimeError
// "PATH: line N: ..." for a bad record (prompt_form, prompt_turns, prompt_messages), a record of
// the other form than the first, or a prompt with no tokens, and "PATH: ..." for a file that
// cannot be read or holds no records.
PromptRecords read_prompt_records(const Tokenizer& tokenizer, const ChatTemplate& chat,
                                  const std::vector<std::string>& paths);

}  // namespace ampt::text

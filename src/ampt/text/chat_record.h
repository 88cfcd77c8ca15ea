// Instruction records of JSON Lines data in the shapes chat datasets come in: a "messages" list
// (with tool turns, tool_calls, reasoning_content and a record-level "tools" list, as OpenAI and
// TRL write them), ShareGPT's "conversations" of {"from", "value"}, Alpaca's "instruction",
// "input" and "output", or TRL's "prompt" and "completion" strings. A record becomes the messages
// a Jinja chat template renders (chat_messages), or the turns of a built-in template (chat_turns).
#pragma once

#include "ampt/core/json_reader.h"
#include "ampt/text/json_lines.h"

#include <string>
#include <string_view>
#include <vector>

namespace ampt::text {

enum class Role { system, user, assistant };

struct Turn {
  Role role = Role::user;
  std::string content;
};

// Whether `record` is an instruction record: an object without the string field `text_field`
// (so a --text_field naming a record's "completion" keeps it a document) that has "messages",
// "conversations", "instruction", "prompt" or "completion".
bool is_chat_record(const JsonValue& record, const std::string& text_field);

enum class RecordShape { messages, sharegpt, alpaca, prompt_completion };
// The shape an instruction record's fields say; the first record of a dataset decides its shape
// (TRL's two, messages and prompt/completion, may mix).
RecordShape record_shape(const JsonValue& record);
std::string_view shape_name(RecordShape shape);

// A record as transformers' apply_chat_template takes it: the messages (objects with "role" and
// the record's other fields; keys holding null dropped, and reasoning under "reasoning_content"
// and "thinking" both, as transformers aliases it) and the "tools" list (null for none).
// ShareGPT's human, gpt, system, function_call (an assistant turn of tool_calls) and observation
// (a tool turn) map to user, assistant, system, assistant and tool; Alpaca's instruction, with
// its input after a newline (as LLaMA-Factory joins them), is the user turn and its output the
// assistant's, after an optional "system". Throws RuntimeError "PATH: line N: ..." naming the
// field: a record of another shape than `shape`, a message without a string role, a content that
// is not a string or list, a ShareGPT "from" that maps to nothing, a malformed tools or
// tool_calls list, or no assistant turn.
struct ChatMessages {
  JsonValue messages;  // an array
  JsonValue tools;     // an array, or null
};
ChatMessages chat_messages(const JsonValue& record, RecordShape shape, const RecordPlace& place);

// The turns of an instruction record, for a built-in template. Throws RuntimeError
// "PATH: line N: ..." naming the field and what it may be: chat_messages' errors, a content that
// is not a string, or a role other than system, user and assistant (a tool turn needs the
// model's own template).
std::vector<Turn> chat_turns(const JsonValue& record, const RecordPlace& place);

// A preference record, as TRL's DPO trainer takes them: "prompt", "chosen" and "rejected", in
// the standard form (three strings) or the conversational one (a list of messages as the prompt,
// and a list holding the assistant turn as each answer).
bool is_preference_record(const JsonValue& record);

// The two examples of a preference record: the prompt's turns followed by the chosen answer, and
// by the rejected one (a standard record's prompt is one user turn, its answers one assistant
// turn each). Throws RuntimeError "PATH: line N: ..." for a missing field, a field of the wrong
// type, a record mixing the two forms, or a conversational answer that holds no assistant turn.
struct PreferenceTurns {
  std::vector<Turn> chosen;
  std::vector<Turn> rejected;
};
PreferenceTurns preference_turns(const JsonValue& record, const RecordPlace& place);

// A conversational preference record's messages for a Jinja template: the prompt's, and each
// answer's (chat_messages' form), with the record's "tools". Throws as preference_turns.
struct PreferenceMessages {
  JsonValue prompt, chosen, rejected;  // arrays
  JsonValue tools;                     // an array, or null
};
PreferenceMessages preference_messages(const JsonValue& record, const RecordPlace& place);

// A prompt record of online RL (GRPO), as TRL's GRPOTrainer takes them: a "prompt" that is a
// string (the standard form, rendered as it is) or a list of messages (the conversational form,
// rendered by the chat template with the generation prompt after it), beside any fields the
// rewards read. Throws RuntimeError "PATH: line N: ..." for a record that is no object, has no
// "prompt", or whose prompt is of another kind, an empty list, or a list with a bad message.
enum class PromptForm { standard, conversational };
PromptForm prompt_form(const JsonValue& record, const RecordPlace& place);
std::string_view prompt_form_name(PromptForm form);

// A conversational prompt's turns for a built-in template (roles system, user and assistant,
// string contents), and its messages and "tools" for a Jinja one (chat_messages' form).
std::vector<Turn> prompt_turns(const JsonValue& record, const RecordPlace& place);
ChatMessages prompt_messages(const JsonValue& record, const RecordPlace& place);

std::string_view role_name(Role role);

}  // namespace ampt::text

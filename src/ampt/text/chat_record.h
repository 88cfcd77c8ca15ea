// Instruction records of JSON Lines data, as Hugging Face TRL takes them: {"prompt", "completion"}
// strings, or a "messages" list of {"role", "content"} turns. A record becomes its turns; a
// prompt/completion record is a user turn and an assistant turn.
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
// "prompt" or "completion".
bool is_chat_record(const JsonValue& record, const std::string& text_field);

// The turns of an instruction record. Throws RuntimeError "PATH: line N: ..." naming the field and
// what it may be: a record that is not an object or has neither form, a prompt without a
// completion (or the reverse), a field of the wrong type, an empty "messages", a message without
// string "role" and "content", a role other than system, user and assistant, or no assistant turn.
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

std::string_view role_name(Role role);

}  // namespace ampt::text

#include "ampt/text/chat_record.h"

#include "ampt/core/errors.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

namespace ampt::text {
namespace {

using Kind = JsonValue::Kind;

constexpr std::array<Role, 3> kRoles = {Role::system, Role::user, Role::assistant};
constexpr std::string_view kMessagesForm = "a list of {\"role\", \"content\"} objects";

[[noreturn]] void bad(const RecordPlace& place, const std::string& what) {
  throw RuntimeError(fmt::format("{}: {}", place.prefix(), what));
}

const std::string& string_field(const JsonValue& object, std::string_view key,
                                const RecordPlace& place, std::string_view where) {
  const JsonValue* value = object.find(key);
  if (value == nullptr) bad(place, fmt::format("{}no \"{}\": expected a string", where, key));
  if (value->kind != Kind::string) {
    bad(place, fmt::format("{}\"{}\" is {}: expected a string", where, key, value->kind_name()));
  }
  return value->string;
}

// The turns of a list of {"role", "content"} objects, the record's field `key`; errors name
// `key[i]`.
std::vector<Turn> list_turns(const JsonValue& list, std::string_view key, const RecordPlace& place) {
  std::vector<Turn> turns;
  for (std::size_t i = 0; i < list.items.size(); ++i) {
    const JsonValue& message = list.items[i];
    const std::string where = fmt::format("{}[{}]: ", key, i);
    if (message.kind != Kind::object) {
      bad(place, fmt::format("{}{}: expected an object with \"role\" and \"content\"", where,
                             message.kind_name()));
    }
    const std::string& name = string_field(message, "role", place, where);
    const auto role = std::ranges::find_if(kRoles, [&](Role r) { return role_name(r) == name; });
    if (role == kRoles.end()) {
      bad(place, fmt::format("{}unknown role \"{}\": expected system, user or assistant", where, name));
    }
    turns.push_back({*role, string_field(message, "content", place, where)});
  }
  return turns;
}

bool answered(const std::vector<Turn>& turns) {
  return std::ranges::any_of(turns, [](const Turn& turn) { return turn.role == Role::assistant; });
}

std::vector<Turn> message_turns(const JsonValue& messages, const RecordPlace& place) {
  if (messages.kind != Kind::array) {
    bad(place, fmt::format("\"messages\" is {}: expected {}", messages.kind_name(), kMessagesForm));
  }
  if (messages.items.empty()) bad(place, fmt::format("\"messages\" is empty: expected {}", kMessagesForm));
  auto turns = list_turns(messages, "messages", place);
  if (!answered(turns)) bad(place, "\"messages\" has no assistant turn: nothing to learn from");
  return turns;
}

// A conversational answer: a list of messages that holds an assistant turn (TRL's form holds
// that turn alone).
std::vector<Turn> answer_turns(const JsonValue& answer, std::string_view key,
                               const RecordPlace& place) {
  if (answer.kind != Kind::array || answer.items.empty()) {
    bad(place, fmt::format("\"{}\" is {}: a conversational preference record's answers are "
                           "lists holding the assistant turn",
                           key, answer.kind == Kind::array ? "an empty list" : answer.kind_name()));
  }
  auto turns = list_turns(answer, key, place);
  if (!answered(turns)) {
    bad(place, fmt::format("\"{}\" holds no assistant turn: expected the assistant's answer, "
                           "e.g. [{{\"role\": \"assistant\", \"content\": \"...\"}}]",
                           key));
  }
  return turns;
}

}  // namespace

bool is_preference_record(const JsonValue& record) {
  return record.kind == Kind::object &&
         (record.find("chosen") != nullptr || record.find("rejected") != nullptr);
}

PreferenceTurns preference_turns(const JsonValue& record, const RecordPlace& place) {
  if (record.kind != Kind::object) {
    bad(place, fmt::format("{}: expected an object with \"prompt\", \"chosen\" and "
                           "\"rejected\"",
                           record.kind_name()));
  }
  for (const char* key : {"prompt", "chosen", "rejected"}) {
    if (record.find(key) == nullptr) {
      bad(place, fmt::format("no \"{}\": a preference record has \"prompt\", \"chosen\" and "
                             "\"rejected\"",
                             key));
    }
  }
  const JsonValue& prompt = *record.find("prompt");
  PreferenceTurns pair;
  if (prompt.kind != Kind::array) {
    const std::string& text = string_field(record, "prompt", place, "");
    for (const char* key : {"chosen", "rejected"}) {
      if (record.find(key)->kind == Kind::array) {
        bad(place, fmt::format("\"{}\" is a list but \"prompt\" a string: a preference record "
                               "is all strings (standard) or all lists of messages "
                               "(conversational)",
                               key));
      }
    }
    pair.chosen = {{Role::user, text}, {Role::assistant, string_field(record, "chosen", place, "")}};
    pair.rejected = {{Role::user, text},
                     {Role::assistant, string_field(record, "rejected", place, "")}};
    return pair;
  }
  const auto context = list_turns(prompt, "prompt", place);
  if (context.empty()) bad(place, fmt::format("\"prompt\" is empty: expected {}", kMessagesForm));
  for (const char* key : {"chosen", "rejected"}) {
    auto turns = context;
    for (Turn& turn : answer_turns(*record.find(key), key, place)) turns.push_back(std::move(turn));
    (std::string_view(key) == "chosen" ? pair.chosen : pair.rejected) = std::move(turns);
  }
  return pair;
}

std::string_view role_name(Role role) {
  switch (role) {
    case Role::system: return "system";
    case Role::user: return "user";
    case Role::assistant: return "assistant";
  }
  return "?";
}

bool is_chat_record(const JsonValue& record, const std::string& text_field) {
  if (record.kind != Kind::object) return false;
  if (const JsonValue* text = record.find(text_field); text != nullptr && text->kind == Kind::string) {
    return false;
  }
  return record.find("messages") != nullptr || record.find("prompt") != nullptr ||
         record.find("completion") != nullptr;
}

std::vector<Turn> chat_turns(const JsonValue& record, const RecordPlace& place) {
  if (record.kind != Kind::object) {
    bad(place, fmt::format("{}: expected an object with \"prompt\" and \"completion\" or \"messages\"",
                           record.kind_name()));
  }
  if (const JsonValue* messages = record.find("messages")) return message_turns(*messages, place);
  if (record.find("prompt") == nullptr && record.find("completion") == nullptr) {
    bad(place, "no \"prompt\" and \"completion\" strings and no \"messages\" list (an instruction "
               "record has one or the other)");
  }
  return {{Role::user, string_field(record, "prompt", place, "")},
          {Role::assistant, string_field(record, "completion", place, "")}};
}

}  // namespace ampt::text

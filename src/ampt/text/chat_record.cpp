#include "ampt/text/chat_record.h"

#include "ampt/core/errors.h"

#include <fmt/format.h>

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

Role role_of(const std::string& name, const RecordPlace& place, std::size_t index) {
  for (const Role role : kRoles) {
    if (role_name(role) == name) return role;
  }
  bad(place, fmt::format("messages[{}]: unknown role \"{}\": expected system, user or assistant",
                         index, name));
}

std::vector<Turn> message_turns(const JsonValue& messages, const RecordPlace& place) {
  if (messages.kind != Kind::array) {
    bad(place, fmt::format("\"messages\" is {}: expected {}", messages.kind_name(), kMessagesForm));
  }
  if (messages.items.empty()) bad(place, fmt::format("\"messages\" is empty: expected {}", kMessagesForm));
  std::vector<Turn> turns;
  bool answered = false;
  for (std::size_t i = 0; i < messages.items.size(); ++i) {
    const JsonValue& message = messages.items[i];
    const std::string where = fmt::format("messages[{}]: ", i);
    if (message.kind != Kind::object) {
      bad(place, fmt::format("{}{}: expected an object with \"role\" and \"content\"", where,
                             message.kind_name()));
    }
    const Role role = role_of(string_field(message, "role", place, where), place, i);
    turns.push_back({role, string_field(message, "content", place, where)});
    answered = answered || role == Role::assistant;
  }
  if (!answered) bad(place, "\"messages\" has no assistant turn: nothing to learn from");
  return turns;
}

}  // namespace

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

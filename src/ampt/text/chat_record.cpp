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

// The field that says a record's shape, in the order they are looked for.
const std::array<std::pair<std::string_view, RecordShape>, 4> kShapeFields = {{
    {"messages", RecordShape::messages},
    {"conversations", RecordShape::sharegpt},
    {"instruction", RecordShape::alpaca},
    {"prompt", RecordShape::prompt_completion},
}};

JsonValue string_json(std::string text) {
  JsonValue v;
  v.kind = Kind::string;
  v.string = std::move(text);
  return v;
}

JsonValue role_message(std::string role, std::string content) {
  JsonValue m;
  m.kind = Kind::object;
  m.members.emplace_back("role", string_json(std::move(role)));
  m.members.emplace_back("content", string_json(std::move(content)));
  return m;
}

// A ShareGPT or Alpaca record's "system" field, as the first turn.
void add_record_system(const JsonValue& record, const RecordPlace& place, JsonValue& messages) {
  if (const JsonValue* system = record.find("system"); system != nullptr && system->kind != Kind::null) {
    messages.items.push_back(role_message("system", string_field(record, "system", place, "")));
  }
}

void require_objects(const JsonValue& list, std::string_view where, std::string_view what,
                     const RecordPlace& place) {
  if (list.kind != Kind::array) bad(place, fmt::format("{} is {}: expected a list of {}", where, list.kind_name(), what));
  for (std::size_t i = 0; i < list.items.size(); ++i) {
    if (list.items[i].kind != Kind::object) {
      bad(place, fmt::format("{}[{}] is {}: expected {}", where, i, list.items[i].kind_name(), what));
    }
  }
}

// A message as transformers hands it to a template: null-valued keys dropped, reasoning under
// "thinking" (first) and "reasoning_content" (last) whichever name the data used.
JsonValue checked_message(const JsonValue& m, const std::string& where, const RecordPlace& place) {
  if (m.kind != Kind::object) {
    bad(place, fmt::format("{}{}: expected an object with \"role\" and \"content\"", where, m.kind_name()));
  }
  string_field(m, "role", place, where);
  JsonValue out;
  out.kind = Kind::object;
  const JsonValue* reasoning = nullptr;
  for (const char* key : {"reasoning_content", "thinking", "reasoning"}) {
    const JsonValue* r = m.find(key);
    if (reasoning == nullptr && r != nullptr && r->kind != Kind::null) reasoning = r;
  }
  if (reasoning != nullptr && m.find("thinking") == nullptr) out.members.emplace_back("thinking", *reasoning);
  for (const auto& [key, value] : m.members) {
    if (value.kind == Kind::null) continue;
    if (key == "content" && value.kind != Kind::string && value.kind != Kind::array) {
      bad(place, fmt::format("{}\"content\" is {}: expected a string or a list of content parts", where,
                             value.kind_name()));
    }
    if (key == "tool_calls") require_objects(value, where + "\"tool_calls\"", "{\"type\", \"function\"} objects", place);
    out.members.emplace_back(key, key == "thinking" && reasoning != nullptr ? *reasoning : value);
  }
  if (reasoning != nullptr) {
    const auto existing = std::ranges::find_if(out.members, [](const auto& member) { return member.first == "reasoning_content"; });
    if (existing != out.members.end()) {
      existing->second = *reasoning;
    } else {
      out.members.emplace_back("reasoning_content", *reasoning);
    }
  }
  const JsonValue* content = out.find("content");
  if (content == nullptr && out.find("tool_calls") == nullptr) {
    bad(place, fmt::format("{}no \"content\": expected a string (or \"tool_calls\" on an assistant turn)", where));
  }
  return out;
}

// ShareGPT's roles, as LLaMA-Factory reads them.
void sharegpt_messages(const JsonValue& record, const RecordPlace& place, JsonValue& messages) {
  const JsonValue& turns = *record.find("conversations");
  if (turns.kind != Kind::array || turns.items.empty()) {
    bad(place, fmt::format("\"conversations\" is {}: expected a list of {{\"from\", \"value\"}} objects",
                           turns.kind == Kind::array ? "empty" : turns.kind_name()));
  }
  add_record_system(record, place, messages);
  for (std::size_t i = 0; i < turns.items.size(); ++i) {
    const JsonValue& turn = turns.items[i];
    const std::string where = fmt::format("conversations[{}]: ", i);
    if (turn.kind != Kind::object) {
      bad(place, fmt::format("{}{}: expected an object with \"from\" and \"value\"", where, turn.kind_name()));
    }
    const std::string& from = string_field(turn, "from", place, where);
    const std::string& value = string_field(turn, "value", place, where);
    if (from == "function_call") {
      JsonValue call;
      try {
        call = parse_json(value);
      } catch (const JsonError& e) {
        bad(place, fmt::format("{}a function_call \"value\" is not JSON: {}", where, e.what()));
      }
      if (call.kind != Kind::object || call.find("name") == nullptr) {
        bad(place, fmt::format("{}a function_call \"value\" is a JSON object with \"name\" and \"arguments\"", where));
      }
      JsonValue tool_call;
      tool_call.kind = Kind::object;
      tool_call.members.emplace_back("type", string_json("function"));
      tool_call.members.emplace_back("function", std::move(call));
      JsonValue calls;
      calls.kind = Kind::array;
      calls.items.push_back(std::move(tool_call));
      JsonValue m;
      m.kind = Kind::object;
      m.members.emplace_back("role", string_json("assistant"));
      m.members.emplace_back("tool_calls", std::move(calls));
      messages.items.push_back(std::move(m));
      continue;
    }
    std::string_view role;
    if (from == "human" || from == "user") role = "user";
    if (from == "gpt" || from == "assistant") role = "assistant";
    if (from == "system") role = "system";
    if (from == "observation" || from == "tool") role = "tool";
    if (role.empty()) {
      bad(place, fmt::format("{}\"from\" is \"{}\": expected human, gpt, system, function_call or observation",
                             where, from));
    }
    messages.items.push_back(role_message(std::string(role), value));
  }
}

// A record's "tools": a list of objects, or a JSON string of one (LLaMA-Factory's ShareGPT).
JsonValue record_tools(const JsonValue& record, const RecordPlace& place) {
  const JsonValue* tools = record.find("tools");
  if (tools == nullptr || tools->kind == Kind::null) return {};
  JsonValue list = *tools;
  if (tools->kind == Kind::string) {
    try {
      list = parse_json(tools->string);
    } catch (const JsonError& e) {
      bad(place, fmt::format("\"tools\" is a string that is not JSON: {}", e.what()));
    }
  }
  require_objects(list, "\"tools\"", "tool schemas ({\"type\": \"function\", \"function\": {...}})", place);
  return list;
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

PreferenceMessages preference_messages(const JsonValue& record, const RecordPlace& place) {
  preference_turns(record, place);  // its errors
  PreferenceMessages pair;
  const auto list = [&](const char* key) {
    JsonValue out;
    out.kind = Kind::array;
    const JsonValue& items = *record.find(key);
    for (std::size_t i = 0; i < items.items.size(); ++i) {
      out.items.push_back(checked_message(items.items[i], fmt::format("{}[{}]: ", key, i), place));
    }
    return out;
  };
  pair.prompt = list("prompt");
  pair.chosen = list("chosen");
  pair.rejected = list("rejected");
  pair.tools = record_tools(record, place);
  return pair;
}

PromptForm prompt_form(const JsonValue& record, const RecordPlace& place) {
  if (record.kind != Kind::object) {
    bad(place, fmt::format("{}: a prompt record is an object with a \"prompt\"", record.kind_name()));
  }
  const JsonValue* prompt = record.find("prompt");
  if (prompt == nullptr) {
    std::string fields;
    for (const auto& [key, value] : record.members) fields += (fields.empty() ? "" : ", ") + key;
    bad(place, fmt::format("no \"prompt\" (the record has {}): a prompt record's \"prompt\" is a string or {}",
                           fields.empty() ? "no fields" : fields, kMessagesForm));
  }
  if (prompt->kind == Kind::string) return PromptForm::standard;
  if (prompt->kind != Kind::array) {
    bad(place, fmt::format("\"prompt\" is {}: expected a string or {}", prompt->kind_name(), kMessagesForm));
  }
  if (prompt->items.empty()) bad(place, fmt::format("\"prompt\" is empty: expected {}", kMessagesForm));
  return PromptForm::conversational;
}

std::string_view prompt_form_name(PromptForm form) {
  return form == PromptForm::standard ? "standard (a string)" : "conversational (a list of messages)";
}

std::vector<Turn> prompt_turns(const JsonValue& record, const RecordPlace& place) {
  return list_turns(*record.find("prompt"), "prompt", place);
}

ChatMessages prompt_messages(const JsonValue& record, const RecordPlace& place) {
  const JsonValue& prompt = *record.find("prompt");
  ChatMessages chat;
  chat.messages.kind = Kind::array;
  for (std::size_t i = 0; i < prompt.items.size(); ++i) {
    chat.messages.items.push_back(checked_message(prompt.items[i], fmt::format("prompt[{}]: ", i), place));
  }
  chat.tools = record_tools(record, place);
  return chat;
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
  return std::ranges::any_of(kShapeFields, [&](const auto& field) { return record.find(field.first) != nullptr; }) ||
         record.find("completion") != nullptr;
}

RecordShape record_shape(const JsonValue& record) {
  for (const auto& [field, shape] : kShapeFields) {
    if (record.kind == Kind::object && record.find(field) != nullptr) return shape;
  }
  return RecordShape::prompt_completion;
}

std::string_view shape_name(RecordShape shape) {
  switch (shape) {
    case RecordShape::messages: return "\"messages\"";
    case RecordShape::sharegpt: return "ShareGPT \"conversations\"";
    case RecordShape::alpaca: return "Alpaca \"instruction\"/\"output\"";
    case RecordShape::prompt_completion: return "\"prompt\"/\"completion\"";
  }
  return "?";
}

namespace {

// chat_messages without its check for an assistant turn.
ChatMessages unchecked_messages(const JsonValue& record, RecordShape shape, const RecordPlace& place) {
  if (record.kind != Kind::object) {
    bad(place, fmt::format("{}: expected an object with \"prompt\" and \"completion\" or \"messages\"",
                           record.kind_name()));
  }
  const RecordShape found = record_shape(record);
  if (found == RecordShape::prompt_completion && record.find("prompt") == nullptr &&
      record.find("completion") == nullptr) {
    bad(place, "no \"prompt\" and \"completion\" strings and no \"messages\" list (an instruction "
               "record has one or the other)");
  }
  // TRL's two forms, prompt/completion and messages, may mix, as they always could here.
  const auto trl = [](RecordShape s) { return s == RecordShape::messages || s == RecordShape::prompt_completion; };
  if (found != shape && !(trl(found) && trl(shape))) {
    bad(place, fmt::format("a record of {}: the data holds {} records, as its first record says",
                           shape_name(found), shape_name(shape)));
  }
  ChatMessages chat;
  chat.messages.kind = Kind::array;
  switch (found) {
    case RecordShape::messages: {
      const JsonValue& messages = *record.find("messages");
      if (messages.kind != Kind::array) {
        bad(place, fmt::format("\"messages\" is {}: expected {}", messages.kind_name(), kMessagesForm));
      }
      if (messages.items.empty()) bad(place, fmt::format("\"messages\" is empty: expected {}", kMessagesForm));
      for (std::size_t i = 0; i < messages.items.size(); ++i) {
        chat.messages.items.push_back(checked_message(messages.items[i], fmt::format("messages[{}]: ", i), place));
      }
      break;
    }
    case RecordShape::sharegpt: sharegpt_messages(record, place, chat.messages); break;
    case RecordShape::alpaca: {
      add_record_system(record, place, chat.messages);
      std::string prompt = string_field(record, "instruction", place, "");
      if (const JsonValue* input = record.find("input"); input != nullptr && input->kind != Kind::null) {
        const std::string& text = string_field(record, "input", place, "");
        if (!text.empty()) prompt += "\n" + text;
      }
      chat.messages.items.push_back(role_message("user", prompt));
      chat.messages.items.push_back(role_message("assistant", string_field(record, "output", place, "")));
      break;
    }
    case RecordShape::prompt_completion:
      chat.messages.items.push_back(role_message("user", string_field(record, "prompt", place, "")));
      chat.messages.items.push_back(role_message("assistant", string_field(record, "completion", place, "")));
      break;
  }
  chat.tools = record_tools(record, place);
  return chat;
}

void require_answer(const ChatMessages& chat, RecordShape shape, const RecordPlace& place) {
  if (std::ranges::none_of(chat.messages.items, [](const JsonValue& m) { return m.find("role")->string == "assistant"; })) {
    bad(place, fmt::format("{} has no assistant turn: nothing to learn from",
                           shape == RecordShape::sharegpt ? "\"conversations\"" : "\"messages\""));
  }
}

}  // namespace

ChatMessages chat_messages(const JsonValue& record, RecordShape shape, const RecordPlace& place) {
  ChatMessages chat = unchecked_messages(record, shape, place);
  require_answer(chat, shape, place);
  return chat;
}

std::vector<Turn> chat_turns(const JsonValue& record, const RecordPlace& place) {
  const RecordShape shape = record_shape(record);
  const ChatMessages chat = unchecked_messages(record, shape, place);
  std::vector<Turn> turns;
  for (std::size_t i = 0; i < chat.messages.items.size(); ++i) {
    const JsonValue& m = chat.messages.items[i];
    const std::string& name = m.find("role")->string;
    const auto role = std::ranges::find_if(kRoles, [&](Role r) { return role_name(r) == name; });
    const std::string where = fmt::format("messages[{}]: ", i);
    if (role == kRoles.end()) {
      bad(place, fmt::format("{}role \"{}\" needs the model's own chat template: the built-in ones "
                             "render system, user and assistant (give the tokenizer a chat_template, "
                             "or pass --chat_template FILE.jinja)",
                             where, name));
    }
    const JsonValue* content = m.find("content");
    if (content == nullptr || content->kind != Kind::string) {
      bad(place, fmt::format("{}\"content\" is {}: the built-in templates render string contents (a "
                             "model's own chat template renders the rest)",
                             where, content == nullptr ? "missing" : content->kind_name()));
    }
    turns.push_back({*role, content->string});
  }
  require_answer(chat, shape, place);
  return turns;
}

}  // namespace ampt::text

#include "ampt/text/chat_template.h"

#include "ampt/core/errors.h"
#include "ampt/core/fnv1a.h"
#include "ampt/core/json_reader.h"
#include "ampt/text/read_file.h"

#include <fmt/format.h>

#include <span>

namespace ampt::text {
namespace {

using Kind = JsonValue::Kind;

constexpr std::string_view kKeys = "begin, system, user, assistant, separator, default_system or trim";
// Python's str.strip() whitespace in ASCII: what Jinja's trim removes around typical content.
constexpr std::string_view kSpace = " \t\n\r\f\v";

std::string token_text(const Tokenizer& tokenizer, int32_t id) {
  return id < 0 ? std::string() : tokenizer.decode(std::span(&id, 1));
}

bool has_specials(const Tokenizer& tokenizer, std::initializer_list<std::string_view> names) {
  for (const std::string_view name : names) {
    if (tokenizer.special_id(name) < 0) return false;
  }
  return true;
}

template <class Make>
void set_turns(ChatTemplate& chat, Make make) {
  chat.system = make(Role::system);
  chat.user = make(Role::user);
  chat.assistant = make(Role::assistant);
}

std::string_view trimmed(std::string_view text) {
  const auto first = text.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(kSpace) - first + 1);
}

std::string string_value(const std::string& where, const JsonValue& value) {
  if (value.kind != Kind::string) {
    throw RuntimeError(fmt::format("{} is {}: expected a string", where, value.kind_name()));
  }
  return value.string;
}

TurnFormat turn_format(const std::string& path, const std::string& key, const JsonValue& value) {
  if (value.kind != Kind::object) {
    throw RuntimeError(fmt::format("{}: \"{}\" is {}: expected an object with \"prefix\" and \"suffix\"",
                                   path, key, value.kind_name()));
  }
  TurnFormat format;
  for (const auto& [name, member] : value.members) {
    const std::string where = fmt::format("{}: \"{}\".\"{}\"", path, key, name);
    if (name == "prefix") {
      format.prefix = string_value(where, member);
    } else if (name == "suffix") {
      format.suffix = string_value(where, member);
    } else {
      throw RuntimeError(fmt::format("{}: unknown key: expected prefix or suffix", where));
    }
  }
  return format;
}

}  // namespace

const TurnFormat& ChatTemplate::format(Role role) const {
  switch (role) {
    case Role::system: return system;
    case Role::user: return user;
    case Role::assistant: return assistant;
  }
  return user;
}

std::string ChatTemplate::style() const { return jinja ? "" : name + " "; }

std::string ChatTemplate::rendered_by() const {
  return jinja ? fmt::format(" (chat template {})", name) : "";
}

uint64_t ChatTemplate::fingerprint() const {
  Fnv1a hash;
  hash.add_field(begin);
  for (const TurnFormat* f : {&system, &user, &assistant}) hash.add_field(f->prefix).add_field(f->suffix);
  hash.add_field(separator).add_field(default_system).add_int(trim ? 1 : 0);
  hash.add_int(jinja ? jinja->fingerprint : 0);
  return hash.digest();
}

ChatTemplate builtin_chat_template(const Tokenizer& tokenizer) {
  ChatTemplate chat;
  if (has_specials(tokenizer, {"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"})) {
    // Meta-Llama-3-8B-Instruct's tokenizer_config.json chat_template, rendered.
    chat.name = "Llama-3";
    chat.begin = token_text(tokenizer, tokenizer.bos_id());
    set_turns(chat, [](Role role) {
      return TurnFormat{fmt::format("<|start_header_id|>{}<|end_header_id|>\n\n", role_name(role)),
                        "<|eot_id|>"};
    });
    chat.trim = true;
  } else if (has_specials(tokenizer, {"<|im_start|>", "<|im_end|>"})) {
    chat.name = "ChatML";
    set_turns(chat, [](Role role) {
      return TurnFormat{fmt::format("<|im_start|>{}\n", role_name(role)), "<|im_end|>"};
    });
    chat.separator = "\n";
  } else {
    chat = plain_chat_template(tokenizer);
  }
  return chat;
}

ChatTemplate plain_chat_template(const Tokenizer& tokenizer) {
  ChatTemplate chat;
  chat.name = "plain";
  chat.begin = token_text(tokenizer, tokenizer.bos_id());
  chat.assistant.suffix = token_text(tokenizer, tokenizer.eot_id());
  return chat;
}

ChatTemplate read_chat_template(const std::string& path) {
  const JsonValue file = read_json_file(path, "a chat template");
  if (file.kind != Kind::object) {
    throw RuntimeError(fmt::format("{}: a chat template is a JSON object with the keys {}", path, kKeys));
  }
  ChatTemplate chat;
  chat.name = path;
  for (const auto& [key, value] : file.members) {
    const std::string where = fmt::format("{}: \"{}\"", path, key);
    if (key == "begin") {
      chat.begin = string_value(where, value);
    } else if (key == "system") {
      chat.system = turn_format(path, key, value);
    } else if (key == "user") {
      chat.user = turn_format(path, key, value);
    } else if (key == "assistant") {
      chat.assistant = turn_format(path, key, value);
    } else if (key == "separator") {
      chat.separator = string_value(where, value);
    } else if (key == "default_system") {
      chat.default_system = string_value(where, value);
    } else if (key == "trim") {
      if (value.kind != Kind::boolean) {
        throw RuntimeError(fmt::format("{} is {}: expected true or false", where, value.kind_name()));
      }
      chat.trim = value.boolean;
    } else {
      throw RuntimeError(fmt::format("{}: unknown key: expected {}", where, kKeys));
    }
  }
  return chat;
}

std::vector<ChatPiece> render_chat(const ChatTemplate& chat, const std::vector<Turn>& turns) {
  std::vector<ChatPiece> pieces;
  const auto add = [&](std::string_view text, bool template_text, bool scored) {
    if (!text.empty()) pieces.push_back({text, template_text, scored});
  };
  const auto add_turn = [&](Role role, std::string_view content) {
    const TurnFormat& f = chat.format(role);
    const bool scored = role == Role::assistant;
    add(f.prefix, true, false);
    add(chat.trim ? trimmed(content) : content, false, scored);
    add(f.suffix, true, scored);
    add(chat.separator, true, false);
  };
  add(chat.begin, true, false);
  if (!chat.default_system.empty() && (turns.empty() || turns.front().role != Role::system)) {
    add_turn(Role::system, chat.default_system);
  }
  for (const Turn& turn : turns) add_turn(turn.role, turn.content);
  return pieces;
}

}  // namespace ampt::text

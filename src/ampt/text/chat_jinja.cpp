#include "ampt/text/chat_jinja.h"

#include "ampt/core/errors.h"
#include "ampt/core/fnv1a.h"
#include "ampt/text/jinja_builtins.h"
#include "ampt/text/read_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

namespace ampt::text {
namespace {

namespace fs = std::filesystem;
using Kind = JsonValue::Kind;
using jinja::Value;

// The directory of the tokenizer's file; empty for a tokenizer read from two files.
fs::path tokenizer_dir(const Tokenizer& tokenizer) {
  const fs::path source(tokenizer.source());
  std::error_code error;
  return fs::is_regular_file(source, error) ? source.parent_path() : fs::path();
}

// The tokenizer_config.json beside the tokenizer's file, where there is one.
std::optional<JsonValue> tokenizer_config(const fs::path& dir) {
  const fs::path path = dir / "tokenizer_config.json";
  std::error_code error;
  if (dir.empty() || !fs::is_regular_file(path, error)) return std::nullopt;
  return read_json_file(path.string(), "a Hugging Face tokenizer_config.json");
}

// transformers' special_tokens_map, which apply_chat_template passes to the template.
void add_special_tokens(const JsonValue& config, jinja::ValueDict& variables) {
  for (const char* key : {"bos_token", "eos_token", "unk_token", "pad_token"}) {
    const JsonValue* value = config.find(key);
    if (value != nullptr && value->kind == Kind::object) value = value->find("content");
    if (value != nullptr && value->kind == Kind::string) variables.set(Value::string(key), Value::string(value->string));
  }
}

JinjaChat make_chat(const std::string& source, std::string file, const JsonValue* config, const std::string& kwargs) {
  JinjaChat chat;
  chat.templ = std::make_shared<const jinja::Template>(source, file);
  chat.file = std::move(file);
  if (config != nullptr) add_special_tokens(*config, chat.variables);
  if (!kwargs.empty()) {
    JsonValue parsed;
    try {
      parsed = parse_json(kwargs);
    } catch (const JsonError& e) {
      throw RuntimeError(fmt::format("--chat_template_kwargs '{}' is not JSON: {}", kwargs, e.what()));
    }
    if (parsed.kind != Kind::object) {
      throw RuntimeError(fmt::format("--chat_template_kwargs '{}' is {}: expected a JSON object such as "
                                     "'{{\"enable_thinking\": false}}'",
                                     kwargs, parsed.kind_name()));
    }
    for (const auto& [key, value] : parsed.members) chat.variables.set(Value::string(key), Value::from_json(value));
  }
  Fnv1a hash;
  hash.add_field(source);
  for (const auto& [key, value] : chat.variables.items) hash.add_field(key.str()).add_field(jinja::to_json(value));
  chat.fingerprint = hash.digest();
  return chat;
}

std::string config_template(const fs::path& path, const JsonValue& config) {
  const JsonValue* templ = config.find("chat_template");
  if (templ == nullptr || templ->kind == Kind::null) return {};
  if (templ->kind == Kind::string) return templ->string;
  if (templ->kind == Kind::array) {
    for (const JsonValue& named : templ->items) {
      const JsonValue* name = named.find("name");
      const JsonValue* text = named.find("template");
      if (name != nullptr && name->kind == Kind::string && name->string == "default" && text != nullptr &&
          text->kind == Kind::string) {
        return text->string;
      }
    }
  }
  throw RuntimeError(fmt::format("{}: \"chat_template\" is {}: expected a string, or a list of {{\"name\", "
                                 "\"template\"}} holding one named \"default\"",
                                 path.string(), templ->kind_name()));
}

jinja::ValueDict variables_for(const JinjaChat& chat, const Value& messages, const Value& tools, bool generation_prompt) {
  jinja::ValueDict variables = chat.variables;
  variables.set(Value::string("messages"), messages);
  variables.set(Value::string("tools"), tools);
  variables.set(Value::string("documents"), Value::none());
  variables.set(Value::string("add_generation_prompt"), Value::boolean(generation_prompt));
  return variables;
}

std::size_t common_prefix(std::string_view a, std::string_view b) {
  std::size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

// Where the tokens of `text`, encoded alone, end: the places a match may stop without cutting a
// special token's text (Phi-3.5's "<|endoftext|>" and "<|user|>" share "<|").
std::vector<std::size_t> token_boundaries(const Tokenizer& tokenizer, std::string_view text) {
  return tokenizer.token_ends(tokenizer.encode(text, SpecialTokens::allowed), text);
}

Value prefix(const jinja::ValueList& messages, std::size_t n) {
  return Value::list(jinja::ValueList(messages.begin(), messages.begin() + static_cast<std::ptrdiff_t>(n)));
}

std::string render(const JinjaChat& chat, const Value& messages, const Value& tools, bool generation_prompt,
                   jinja::Spans* spans = nullptr) {
  return chat.templ->render(variables_for(chat, messages, tools, generation_prompt), spans);
}

}  // namespace

std::optional<JinjaChat> tokenizer_jinja_chat(const Tokenizer& tokenizer, const std::string& kwargs) {
  const fs::path dir = tokenizer_dir(tokenizer);
  if (dir.empty()) return std::nullopt;
  const auto config = tokenizer_config(dir);
  const JsonValue* tokens = config ? &*config : nullptr;
  std::error_code error;
  if (const fs::path file = dir / "chat_template.jinja"; fs::is_regular_file(file, error)) {
    return make_chat(read_text_file(file.string()), file.string(), tokens, kwargs);
  }
  if (!config) return std::nullopt;
  const fs::path config_path = dir / "tokenizer_config.json";
  const std::string source = config_template(config_path, *config);
  if (source.empty()) return std::nullopt;
  return make_chat(source, config_path.string() + " chat_template", tokens, kwargs);
}

JinjaChat read_jinja_chat(const std::string& path, const Tokenizer& tokenizer, const std::string& kwargs) {
  const auto config = tokenizer_config(tokenizer_dir(tokenizer));
  return make_chat(read_text_file(path), path, config ? &*config : nullptr, kwargs);
}

std::string render_jinja_text(const JinjaChat& chat, const JsonValue& messages, const JsonValue& tools,
                              bool generation_prompt) {
  return render(chat, Value::from_json(messages), Value::from_json(tools), generation_prompt);
}

RenderedChat render_jinja_chat(const JinjaChat& chat, const Tokenizer& tokenizer, const JsonValue& messages,
                               const JsonValue& tools) {
  const Value all = Value::from_json(messages);
  const Value tool_list = Value::from_json(tools);
  const jinja::ValueList& list = all.as_list();
  RenderedChat out;
  jinja::Spans generation;
  out.text = render(chat, all, tool_list, false, &generation);
  const auto fail = [&](std::size_t i, const std::string& what) {
    throw RuntimeError(fmt::format("messages[{}]: {} {}", i, chat.file, what));
  };
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string role = jinja::attribute(list[i], "role").str();
    if (role == "system" || role == "user" || role == "assistant") continue;
    if (render(chat, prefix(list, i), tool_list, false) == render(chat, prefix(list, i + 1), tool_list, false)) {
      fail(i, fmt::format("renders nothing for the role \"{}\": a role this template does not know", role));
    }
  }
  if (chat.templ->marks_generation()) {
    for (const auto& [begin, end] : generation) out.scored.push_back({begin, end, false});
    return out;
  }
  std::size_t previous_end = 0;
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (jinja::attribute(list[i], "role").str() != "assistant") continue;
    const std::string before = render(chat, prefix(list, i), tool_list, true);
    const std::string through = render(chat, prefix(list, i + 1), tool_list, false);
    // The turn rendered alone starts where the two part, past what of it the rest of the prompt
    // ends with: Mistral v0.3 puts the system prompt in the last user turn, so a prompt holds it
    // and a chat through the turn does not; DeepSeek-R1's generation prompt opens a reasoning
    // block that a rendered turn does not have.
    std::size_t start = common_prefix(before, through);
    if (start < before.size()) {
      const std::string_view prompt_rest = std::string_view(before).substr(start);
      const std::string_view head = std::string_view(through).substr(start, prompt_rest.size());
      std::size_t overlap = 0;
      for (const std::size_t end : token_boundaries(tokenizer, head)) {
        if (prompt_rest.ends_with(head.substr(0, end))) overlap = end;
      }
      start += overlap;
    }
    const std::string_view turn = std::string_view(through).substr(start);
    ScoredSpan span{start, through.size(), true};
    if (!out.text.starts_with(through)) {
      // The chat renders the turn otherwise when later turns follow it: its text is then found
      // whole after the previous turn, or else, from where the chat and the prompt part, by the
      // longer of the tokens it starts with (Phi-3.5 ends a chat with the EOS) and those it ends
      // with (Qwen3 drops an earlier turn's reasoning).
      if (const std::size_t at = out.text.find(turn, previous_end); at != std::string::npos) {
        span = {at, at + turn.size(), true};
      } else {
        const std::size_t from = common_prefix(before, out.text);
        const std::string_view rest = std::string_view(out.text).substr(from);
        std::size_t starts = 0;
        std::size_t ends = 0;
        std::size_t token_start = 0;
        for (const std::size_t end : token_boundaries(tokenizer, turn)) {
          if (starts == token_start && rest.substr(0, end) == turn.substr(0, end)) starts = end;
          const std::size_t k = turn.size() - token_start;
          if (ends == 0 && k <= rest.size() && rest[0] == turn[token_start] && rest.substr(0, k) == turn.substr(token_start)) {
            ends = k;
          }
          token_start = end;
        }
        if (std::max(starts, ends) == 0) {
          fail(i, "renders this assistant turn apart and within the chat with nothing in common, so its "
                  "tokens cannot be told: give the template {% generation %} blocks");
        }
        span = {from, from + std::max(starts, ends), true};
      }
    }
    previous_end = span.end;
    out.scored.push_back(span);
  }
  return out;
}

std::vector<bool> scored_tokens(const Tokenizer& tokenizer, std::string_view text, std::span<const int32_t> ids,
                                const std::vector<ScoredSpan>& spans) {
  const auto ends = tokenizer.token_ends(ids, text);
  std::vector<bool> scored(ids.size(), false);
  std::size_t t = 0;
  for (const ScoredSpan& span : spans) {
    // Tokens are in order and spans too: the first token ending after the span's start.
    t = static_cast<std::size_t>(std::upper_bound(ends.begin(), ends.end(), span.begin) - ends.begin());
    std::size_t last = t;
    for (; t < ids.size() && (t == 0 ? 0 : ends[t - 1]) < span.end; ++t) {
      scored[t] = true;
      last = t + 1;
    }
    if (!span.trim) continue;
    // Whitespace after the end-of-turn token is not scored.
    std::size_t k = last;
    while (k > 0 && scored[k - 1] && !tokenizer.is_special(ids[k - 1])) {
      const std::string text = tokenizer.decode(ids.subspan(k - 1, 1));
      if (text.find_first_not_of(" \t\r\n") != std::string::npos) break;
      --k;
    }
    if (k > 0 && k < last && tokenizer.is_special(ids[k - 1])) {
      for (std::size_t j = k; j < last; ++j) scored[j] = false;
    }
  }
  return scored;
}

}  // namespace ampt::text

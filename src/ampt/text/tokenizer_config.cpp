#include "ampt/text/tokenizer_config.h"

#include "ampt/core/errors.h"
#include "ampt/core/json_reader.h"
#include "ampt/text/read_file.h"

#include <fmt/format.h>

#include <optional>

namespace ampt::text {
namespace {

// The text of a token field: "<|x|>" or {"content": "<|x|>", ...}; nullopt when absent or null.
std::optional<std::string> token_text(const std::string& path, const JsonValue& config,
                                      std::string_view key) {
  const JsonValue* value = config.find(key);
  if (value == nullptr || value->kind == JsonValue::Kind::null) return std::nullopt;
  if (value->kind == JsonValue::Kind::object) value = value->find("content");
  if (value == nullptr || value->kind != JsonValue::Kind::string) {
    throw RuntimeError(fmt::format("{}: {} is not a string or an object with \"content\"", path, key));
  }
  return value->string;
}

// The id of the token whose bytes are `text`, special tokens first.
int32_t token_id(const std::string& path, const Vocabulary& vocabulary, std::string_view key,
                 const std::string& text) {
  for (const int32_t id : vocabulary.special_ids) {
    if (vocabulary.tokens[id] == text) return id;
  }
  for (std::size_t id = 0; id < vocabulary.tokens.size(); ++id) {
    if (vocabulary.tokens[id] == text) return static_cast<int32_t>(id);
  }
  throw RuntimeError(fmt::format("{}: {} \"{}\" is not a token of {}", path, key, text, vocabulary.source));
}

}  // namespace

void read_tokenizer_config(const std::string& path, Vocabulary& vocabulary) {
  const JsonValue config = read_json_file(path, "a Hugging Face tokenizer_config.json");
  if (const auto eos = token_text(path, config, "eos_token")) {
    vocabulary.eos = token_id(path, vocabulary, "eos_token", *eos);
  }
  const JsonValue* add_bos = config.find("add_bos_token");
  if (add_bos == nullptr || add_bos->kind != JsonValue::Kind::boolean) return;
  vocabulary.bos = -1;
  if (!add_bos->boolean) return;
  const auto bos = token_text(path, config, "bos_token");
  if (!bos) throw RuntimeError(fmt::format("{}: add_bos_token is true but bos_token is null", path));
  vocabulary.bos = token_id(path, vocabulary, "bos_token", *bos);
}

}  // namespace ampt::text

#include "ampt/text/hf_files.h"

#include "ampt/core/errors.h"
#include "ampt/text/byte_alphabet.h"
#include "ampt/core/json_reader.h"
#include "ampt/text/pretokenizer.h"
#include "ampt/text/read_file.h"

#include <fmt/format.h>

#include <cmath>
#include <optional>
#include <unordered_map>

namespace ampt::text {
namespace {

constexpr std::string_view kGpt2EndOfText = "<|endoftext|>";

// The byte a SentencePiece byte-fallback token stands for ("<0x41>" → 0x41); -1 for another.
int fallback_byte(std::string_view written) {
  if (written.size() != 6 || !written.starts_with("<0x") || written.back() != '>') return -1;
  int byte = 0;
  for (const char c : written.substr(3, 2)) {
    const int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (digit < 0) return -1;
    byte = byte * 16 + digit;
  }
  return byte;
}

class Reader {
 public:
  explicit Reader(std::string source) { vocabulary_.source = std::move(source); }

  [[noreturn]] void fail(const std::string& what) const {
    throw RuntimeError(fmt::format("{}: {}", vocabulary_.source, what));
  }

  int32_t id_of(const JsonValue& value, std::string_view what) const {
    if (value.kind != JsonValue::Kind::number || value.number < 0 || value.number >= 1e9 ||
        value.number != std::floor(value.number)) {
      fail(fmt::format("{} is not a token id (a whole number >= 0)", what));
    }
    return static_cast<int32_t>(value.number);
  }

  // The vocabulary object {token: id}: ids must be 0..N-1, each once. Byte-level tokens are
  // written in GPT-2's byte alphabet; SentencePiece's (`byte_level` false) as they are, their
  // <0xXX> tokens standing for byte XX.
  void read_vocab(const JsonValue& vocab, bool byte_level = true) {
    if (vocab.kind != JsonValue::Kind::object) fail(fmt::format("the vocabulary is {}, not an object", vocab.kind_name()));
    if (vocab.members.empty()) fail("the vocabulary is empty");
    auto& tokens = vocabulary_.tokens;
    tokens.assign(vocab.members.size(), {});
    std::vector<bool> seen(tokens.size(), false);
    std::string bytes;
    for (const auto& [written, value] : vocab.members) {
      const int32_t id = id_of(value, fmt::format("the id of token \"{}\"", written));
      if (id >= static_cast<int32_t>(tokens.size())) {
        fail(fmt::format("token \"{}\" has id {}, but ids must be 0..{} (one per token)", written, id,
                         tokens.size() - 1));
      }
      if (seen[id]) fail(fmt::format("id {} is given to two tokens", id));
      if (!byte_level) {
        bytes = written;
        if (const int byte = fallback_byte(written); byte >= 0) {
          vocabulary_.byte_fallback.resize(256, -1);
          vocabulary_.byte_fallback[static_cast<std::size_t>(byte)] = id;
          bytes = std::string(1, static_cast<char>(byte));
        }
      } else if (!token_bytes(written, bytes)) {
        fail(fmt::format("token \"{}\" (id {}) is not in GPT-2's byte-level alphabet", written, id));
      }
      seen[id] = true;
      tokens[id] = bytes;
      id_of_written_.emplace(written, id);
    }
  }

  void add_merge(std::string_view left, std::string_view right, std::string_view where) {
    const auto l = id_of_written_.find(std::string(left));
    const auto r = id_of_written_.find(std::string(right));
    if (l == id_of_written_.end() || r == id_of_written_.end()) {
      fail(fmt::format("{}: merge \"{} {}\" names a token that is not in the vocabulary", where,
                       left, right));
    }
    const auto result = id_of_written_.find(std::string(left) + std::string(right));
    if (result == id_of_written_.end()) {
      fail(fmt::format("{}: the result of merge \"{} {}\" is not in the vocabulary", where, left, right));
    }
    vocabulary_.merges.push_back({l->second, r->second,
                                  static_cast<int32_t>(vocabulary_.merges.size()), result->second});
  }

  // A merge line "left right" (merges.txt, and tokenizer.json before tokenizers 0.20).
  void add_merge_line(std::string_view line, std::string_view where) {
    const std::size_t space = line.find(' ');
    if (space == std::string_view::npos || line.find(' ', space + 1) != std::string_view::npos ||
        space == 0 || space + 1 == line.size()) {
      fail(fmt::format("{}: expected two tokens separated by one space, found \"{}\"", where, line));
    }
    add_merge(line.substr(0, space), line.substr(space + 1), where);
  }

  void add_special(std::string_view written, int32_t id) {
    const auto known = id_of_written_.find(std::string(written));
    if (known != id_of_written_.end() && known->second != id) {
      fail(fmt::format("added token \"{}\" has id {} but the vocabulary gives it {}", written, id,
                       known->second));
    }
    auto& tokens = vocabulary_.tokens;
    if (known == id_of_written_.end()) {
      if (id != static_cast<int32_t>(tokens.size())) {
        fail(fmt::format("added token \"{}\" has id {}; the next free id is {}", written, id,
                         tokens.size()));
      }
      tokens.emplace_back(written);
      id_of_written_.emplace(written, id);
    }
    vocabulary_.special_ids.push_back(id);
  }

  void add_end_of_text_from_vocab() {
    const auto it = id_of_written_.find(std::string(kGpt2EndOfText));
    if (it == id_of_written_.end()) fail(fmt::format("no token {} in the vocabulary", kGpt2EndOfText));
    vocabulary_.special_ids.push_back(it->second);
  }

  // The id of a token as the file writes it, -1 when there is none.
  int32_t find_token(const std::string& written) const {
    const auto it = id_of_written_.find(written);
    return it == id_of_written_.end() ? -1 : it->second;
  }

  Vocabulary& vocabulary() { return vocabulary_; }
  void set_source(std::string source) { vocabulary_.source = std::move(source); }
  Vocabulary take() { return std::move(vocabulary_); }

 private:
  Vocabulary vocabulary_;
  std::unordered_map<std::string, int32_t> id_of_written_;
};

std::string string_field(const JsonValue& object, std::string_view key) {
  const JsonValue* value = object.find(key);
  return value != nullptr && value->kind == JsonValue::Kind::string ? value->string : "";
}

bool bool_field(const JsonValue& object, std::string_view key, bool fallback) {
  const JsonValue* value = object.find(key);
  return value != nullptr && value->kind == JsonValue::Kind::boolean ? value->boolean : fallback;
}

constexpr std::string_view kPreTokenizers =
    "ampt implements GPT-2's ByteLevel (use_regex true, add_prefix_space false), and Sequence "
    "[Split (behavior Isolated, invert false) with GPT-2's, Llama-3's or Qwen2's regex, ByteLevel "
    "(use_regex false, add_prefix_space false)]";

// The pattern of a pre_tokenizer ampt implements; refuses any other by name, as its ids would
// silently differ.
PreTokenizer read_pre_tokenizer(const Reader& reader, const JsonValue& root) {
  const auto refuse = [&](const std::string& what) {
    reader.fail(fmt::format("pre_tokenizer {} is not supported: {}", what, kPreTokenizers));
  };
  const JsonValue* pre = root.find("pre_tokenizer");
  if (pre == nullptr || pre->kind != JsonValue::Kind::object) refuse("null");
  const std::string type = string_field(*pre, "type");
  const auto byte_level_ok = [&](const JsonValue& step, bool use_regex) {
    return bool_field(step, "use_regex", true) == use_regex &&
           !bool_field(step, "add_prefix_space", false);
  };
  if (type == "ByteLevel") {
    if (!byte_level_ok(*pre, true)) refuse("ByteLevel with use_regex false or add_prefix_space true");
    return PreTokenizer::gpt2;
  }
  const JsonValue* steps = pre->find("pretokenizers");
  if (type != "Sequence" || steps == nullptr || steps->items.size() != 2 ||
      string_field(steps->items[0], "type") != "Split" ||
      string_field(steps->items[1], "type") != "ByteLevel") {
    std::string names;
    if (steps != nullptr) {
      for (const JsonValue& step : steps->items) names += (names.empty() ? "" : ", ") + string_field(step, "type");
    }
    refuse(type == "Sequence" ? fmt::format("Sequence [{}]", names) : type);
  }
  const JsonValue& split = steps->items[0];
  if (!byte_level_ok(steps->items[1], false)) {
    refuse("Sequence [Split, ByteLevel] with a ByteLevel of use_regex true or add_prefix_space true");
  }
  if (string_field(split, "behavior") != "Isolated" || bool_field(split, "invert", false)) {
    refuse(fmt::format("Split with behavior {} and invert {}", string_field(split, "behavior"),
                       bool_field(split, "invert", false)));
  }
  const JsonValue* pattern = split.find("pattern");
  const JsonValue* regex = pattern != nullptr ? pattern->find("Regex") : nullptr;
  if (regex == nullptr || regex->kind != JsonValue::Kind::string) refuse("Split without a Regex pattern");
  const auto known = pre_tokenizer_of_regex(regex->string);
  if (!known) refuse(fmt::format("Split with the regex {}", regex->string));
  return *known;
}

bool is_null(const JsonValue* value) {
  return value == nullptr || value->kind == JsonValue::Kind::null;
}

// SentencePiece's BPE as Hugging Face converts it (Llama-2's, Mistral's): the normalizer
// Sequence [Prepend "▁", Replace " " with "▁"] and no pre_tokenizer, or no normalizer and the
// pre_tokenizer Metaspace ("▁", prepend_scheme first or always, split false). nullopt: neither;
// a Metaspace of other settings is refused.
std::optional<Metaspace> sentencepiece_form(const Reader& reader, const JsonValue& root) {
  const JsonValue* normalizer = root.find("normalizer");
  const JsonValue* pre = root.find("pre_tokenizer");
  if (!is_null(normalizer) && string_field(*normalizer, "type") == "Sequence" && is_null(pre)) {
    const JsonValue* steps = normalizer->find("normalizers");
    if (steps == nullptr || steps->items.size() != 2) return std::nullopt;
    const JsonValue& prepend = steps->items[0];
    const JsonValue& replace = steps->items[1];
    const JsonValue* pattern = replace.find("pattern");
    if (string_field(prepend, "type") != "Prepend" || string_field(prepend, "prepend") != kMetaspace ||
        string_field(replace, "type") != "Replace" || pattern == nullptr ||
        string_field(*pattern, "String") != " " || string_field(replace, "content") != kMetaspace) {
      return std::nullopt;
    }
    return Metaspace{.every_text = true, .unless_space = false};
  }
  if (!is_null(normalizer) || is_null(pre) || string_field(*pre, "type") != "Metaspace") {
    return std::nullopt;
  }
  // Before tokenizers 0.14 Metaspace said add_prefix_space (true: before every text).
  const std::string scheme = pre->find("prepend_scheme") != nullptr
                                 ? string_field(*pre, "prepend_scheme")
                                 : (bool_field(*pre, "add_prefix_space", true) ? "always" : "never");
  if (string_field(*pre, "replacement") != kMetaspace || bool_field(*pre, "split", true) ||
      (scheme != "first" && scheme != "always")) {
    reader.fail(fmt::format("pre_tokenizer Metaspace with replacement \"{}\", split {} and "
                            "prepend_scheme {} is not supported: ampt implements \"▁\", split "
                            "false, prepend_scheme first or always",
                            string_field(*pre, "replacement"), bool_field(*pre, "split", true),
                            scheme));
  }
  return Metaspace{.every_text = scheme == "always", .unless_space = true};
}

// Only what the known pipelines hold is implemented: refuse files whose ids would silently differ.
void check_model(const Reader& reader, const JsonValue& root, const JsonValue& model,
                 bool sentencepiece) {
  if (const std::string type = string_field(model, "type"); !type.empty() && type != "BPE") {
    reader.fail(fmt::format("model type {} is not supported (only BPE)", type));
  }
  if (!string_field(model, "continuing_subword_prefix").empty() ||
      !string_field(model, "end_of_word_suffix").empty()) {
    reader.fail("model options continuing_subword_prefix and end_of_word_suffix are not "
                "supported (byte-level and SentencePiece BPE have none)");
  }
  if (bool_field(model, "byte_fallback", false) && !sentencepiece) {
    reader.fail("model option byte_fallback is supported with SentencePiece's pipeline only "
                "(Metaspace, or the normalizer Prepend and Replace \"▁\")");
  }
  if (sentencepiece) return;
  if (const JsonValue* normalizer = root.find("normalizer");
      normalizer != nullptr && normalizer->kind != JsonValue::Kind::null &&
      string_field(*normalizer, "type") != "NFC") {
    reader.fail(fmt::format("normalizer {} is not supported (ampt implements NFC, Qwen2's, "
                            "none, GPT-2's and Llama-3's \"normalizer\": null, and "
                            "SentencePiece's Prepend and Replace \"▁\")",
                            string_field(*normalizer, "type")));
  }
}

// Qwen2's files put each text in Unicode NFC before the pre-tokenizer.
bool normalizes_to_nfc(const JsonValue& root) {
  const JsonValue* normalizer = root.find("normalizer");
  return normalizer != nullptr && normalizer->kind == JsonValue::Kind::object &&
         string_field(*normalizer, "type") == "NFC";
}

// The BOS that a TemplateProcessing post_processor puts before a single text (Llama-3's
// <|begin_of_text|>), alone or in a Sequence of processors; -1 for none.
int32_t template_bos(const Reader& reader, const JsonValue* processor) {
  if (processor == nullptr || processor->kind != JsonValue::Kind::object) return -1;
  const std::string type = string_field(*processor, "type");
  if (const JsonValue* steps = processor->find("processors"); type == "Sequence" && steps != nullptr) {
    for (const JsonValue& step : steps->items) {
      if (const int32_t bos = template_bos(reader, &step); bos >= 0) return bos;
    }
    return -1;
  }
  const JsonValue* single = processor->find("single");
  if (type != "TemplateProcessing" || single == nullptr || single->items.empty()) return -1;
  const JsonValue* special = single->items.front().find("SpecialToken");
  if (special == nullptr) return -1;
  const std::string name = string_field(*special, "id");
  const int32_t id = reader.find_token(name);
  if (id < 0) reader.fail(fmt::format("post_processor puts \"{}\" first, which is not a token", name));
  return id;
}

// SentencePiece's text is cut before each word's "▁" (pretokenizer.h): exact only where no
// token reaches across such a cut, as SentencePiece's own training (split_by_whitespace) makes
// them.
void check_words(Reader& reader) {
  const auto& tokens = reader.vocabulary().tokens;
  for (std::size_t id = 0; id < tokens.size(); ++id) {
    const std::string_view token = tokens[id];
    // A "▁" is fine only within the token's leading run of them.
    std::size_t lead = 0;
    while (token.substr(lead).starts_with(kMetaspace)) lead += kMetaspace.size();
    if (token.find(kMetaspace, lead) != std::string_view::npos) {
      reader.fail(fmt::format("token \"{}\" (id {}) holds a \"▁\" after other characters: ampt "
                              "encodes SentencePiece text word by word, which no token may cross",
                              token, id));
    }
  }
}

}  // namespace

Vocabulary read_tokenizer_json(const std::string& path) {
  const JsonValue root = read_json_file(path, "a Hugging Face tokenizer.json");
  Reader reader(path);
  const JsonValue* model = root.find("model");
  if (model == nullptr || model->kind != JsonValue::Kind::object) {
    reader.fail("no \"model\" object: not a Hugging Face tokenizer.json");
  }
  const auto sentencepiece = sentencepiece_form(reader, root);
  check_model(reader, root, *model, sentencepiece.has_value());
  if (sentencepiece) {
    reader.vocabulary().pre_tokenizer = PreTokenizer::sentencepiece;
    reader.vocabulary().metaspace = *sentencepiece;
  } else {
    reader.vocabulary().pre_tokenizer = read_pre_tokenizer(reader, root);
    reader.vocabulary().nfc = normalizes_to_nfc(root);
  }
  reader.vocabulary().ignore_merges = bool_field(*model, "ignore_merges", false);
  const JsonValue* vocab = model->find("vocab");
  const JsonValue* merges = model->find("merges");
  if (vocab == nullptr || merges == nullptr || merges->kind != JsonValue::Kind::array) {
    reader.fail("model has no \"vocab\" object and \"merges\" array");
  }
  if (sentencepiece && !bool_field(*model, "byte_fallback", false)) {
    reader.fail("SentencePiece BPE without byte_fallback is not supported: a character without "
                "a token would be <unk>, which ampt does not implement");
  }
  reader.read_vocab(*vocab, !sentencepiece);
  if (sentencepiece) check_words(reader);
  for (std::size_t i = 0; i < merges->items.size(); ++i) {
    const JsonValue& merge = merges->items[i];
    const std::string where = fmt::format("merge {}", i);
    if (merge.kind == JsonValue::Kind::string) {
      reader.add_merge_line(merge.string, where);
    } else if (merge.kind == JsonValue::Kind::array && merge.items.size() == 2 &&
               merge.items[0].kind == JsonValue::Kind::string &&
               merge.items[1].kind == JsonValue::Kind::string) {
      reader.add_merge(merge.items[0].string, merge.items[1].string, where);
    } else {
      reader.fail(fmt::format("{} is {}, not \"a b\" or [\"a\", \"b\"]", where, merge.kind_name()));
    }
  }
  if (const JsonValue* added = root.find("added_tokens"); added != nullptr) {
    for (const JsonValue& token : added->items) {
      const JsonValue* id = token.find("id");
      const JsonValue* content = token.find("content");
      if (id == nullptr || content == nullptr || content->kind != JsonValue::Kind::string) {
        reader.fail("an added_tokens entry lacks \"id\" or \"content\"");
      }
      for (const std::string_view flag : {"lstrip", "rstrip", "single_word"}) {
        if (bool_field(token, flag, false)) {
          reader.fail(fmt::format("added token \"{}\" has {} true, which ampt does not implement",
                                  content->string, flag));
        }
      }
      reader.add_special(content->string, reader.id_of(*id, "an added token's id"));
    }
  }
  reader.vocabulary().bos = template_bos(reader, root.find("post_processor"));
  return reader.take();
}

Vocabulary read_vocab_and_merges(const std::string& vocab_path, const std::string& merges_path) {
  const JsonValue vocab = read_json_file(vocab_path, "GPT-2's vocab.json");
  Reader reader(vocab_path);
  reader.read_vocab(vocab);
  reader.add_end_of_text_from_vocab();
  reader.set_source(merges_path);  // merge errors name merges.txt
  const std::string merges = read_text_file(merges_path);
  for_each_line(merges, [&](std::string_view line, std::size_t number) {
    if (line.empty() || (number == 1 && line.starts_with("#version"))) return;
    reader.add_merge_line(line, fmt::format("line {}", number));
  });
  Vocabulary vocabulary = reader.take();
  vocabulary.source = vocab_path + " + " + merges_path;
  return vocabulary;
}

}  // namespace ampt::text

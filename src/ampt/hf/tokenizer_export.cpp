#include "ampt/hf/tokenizer_export.h"

#include "ampt/checkpoint/atomic_file.h"
#include "ampt/core/errors.h"
#include "ampt/core/json_reader.h"
#include "ampt/core/json_text.h"
#include "ampt/text/hf_tokenizer_writer.h"
#include "ampt/text/read_file.h"
#include "ampt/text/tokenizer.h"
#include "ampt/text/tokenizer_files.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <filesystem>

namespace ampt::hf {
namespace {

namespace fs = std::filesystem;
using Format = text::TokenizerSource::Format;

constexpr std::string_view kConfig = "tokenizer_config.json";
// What AutoTokenizer reads beside tokenizer.json or vocab.json + merges.txt.
constexpr std::array<std::string_view, 7> kCompanions = {
    "special_tokens_map.json", "added_tokens.json", "chat_template.jinja", "chat_template.json",
    "vocab.json",              "merges.txt",        "tokenizer.model"};
// Of those, what goes along with a rank file: its chat templates. Its own configs (Qwen's name
// a remote-code class that reads the rank file) would contradict the tokenizer.json written.
constexpr std::array<std::string_view, 2> kTemplates = {"chat_template.jinja", "chat_template.json"};

bool is_file(const fs::path& path) {
  std::error_code error;
  return fs::is_regular_file(path, error);
}

void copy_into(const fs::path& from, const fs::path& to) {
  std::error_code error;
  fs::copy_file(from, to, fs::copy_options::overwrite_existing, error);
  if (error) {
    throw RuntimeError(fmt::format("cannot copy '{}' to '{}': {}", from.string(), to.string(), error.message()));
  }
}

std::string token_or_null(const text::Vocabulary& vocabulary, int32_t id) {
  return id < 0 ? "null" : json_string(vocabulary.tokens[static_cast<std::size_t>(id)]);
}

// The tokenizer_config.json written where the run's tokenizer had none, or had a rank file's.
std::string written_config(const ExportTokenizer& tokenizer, Format format, int64_t model_max_length) {
  if (format == Format::vocab_and_merges) {
    // GPT-2's one special token is its beginning, end and unknown token alike; the tokenizer
    // puts none of them before a text.
    const std::string eot = json_string("<|endoftext|>");
    return fmt::format("{{\n  \"tokenizer_class\": \"GPT2Tokenizer\",\n  \"add_prefix_space\": false,\n"
                       "  \"add_bos_token\": false,\n  \"bos_token\": {0},\n  \"eos_token\": {0},\n"
                       "  \"unk_token\": {0},\n  \"model_max_length\": {1}\n}}\n",
                       eot, model_max_length);
  }
  return fmt::format("{{\n  \"tokenizer_class\": \"PreTrainedTokenizerFast\",\n  \"bos_token\": {},\n"
                     "  \"eos_token\": {},\n  \"model_max_length\": {}\n}}\n",
                     token_or_null(tokenizer.vocabulary, tokenizer.bos),
                     token_or_null(tokenizer.vocabulary, tokenizer.eos), model_max_length);
}

// The run's tokenizer_config.json as it is, or with `tokenizer_class` put first where it names
// none.
std::string copied_config(const std::string& path, std::string_view tokenizer_class) {
  const std::string text = text::read_text_file(path);
  JsonValue root;
  try {
    root = parse_json(text);
  } catch (const JsonError& e) {
    throw RuntimeError(fmt::format("{}: invalid JSON: {}", path, e.what()));
  }
  if (root.kind != JsonValue::Kind::object) throw RuntimeError(fmt::format("{}: not a JSON object", path));
  if (root.find("tokenizer_class") != nullptr) return text;
  const std::size_t brace = text.find('{');
  return text.substr(0, brace + 1) + fmt::format("\n  \"tokenizer_class\": \"{}\"{}", tokenizer_class,
                                                 root.members.empty() ? "\n" : ",") +
         text.substr(brace + 1);
}

}  // namespace

ExportTokenizer read_export_tokenizer(const std::string& path, int64_t model_vocab) {
  ExportTokenizer tokenizer{path, text::load_vocabulary(path)};
  const text::Tokenizer checked(tokenizer.vocabulary);  // the checks a run's tokenizer passes
  if (checked.vocab_size() > model_vocab) {
    throw UsageError(fmt::format("the tokenizer {} has {} tokens but the model has {}",
                                 tokenizer.vocabulary.source, checked.vocab_size(), model_vocab));
  }
  tokenizer.bos = checked.bos_id();
  tokenizer.eos = checked.eot_id();
  return tokenizer;
}

std::vector<std::string> write_tokenizer_files(const ExportTokenizer& tokenizer, const std::string& dir,
                                               int64_t model_max_length) {
  const text::TokenizerSource source = text::locate_tokenizer(tokenizer.path);
  const fs::path out(dir);
  const fs::path from = fs::path(source.file).parent_path();
  std::vector<std::string> written;
  const auto copy_companions = [&](const auto& names) {
    for (const std::string_view name : names) {
      const fs::path file = from / name;
      if (!is_file(file) || std::ranges::find(written, name) != written.end()) continue;
      copy_into(file, out / name);
      written.emplace_back(name);
    }
  };
  const std::string config = (out / kConfig).string();
  switch (source.format) {
    case Format::tokenizer_json:
      copy_into(source.file, out / "tokenizer.json");
      written.emplace_back("tokenizer.json");
      copy_companions(kCompanions);
      checkpoint::write_file_atomically(config, source.config.empty()
                                                    ? written_config(tokenizer, source.format, model_max_length)
                                                    : copied_config(source.config, "PreTrainedTokenizerFast"));
      break;
    case Format::vocab_and_merges:
      copy_companions(kCompanions);  // vocab.json and merges.txt among them
      checkpoint::write_file_atomically(config, source.config.empty()
                                                    ? written_config(tokenizer, source.format, model_max_length)
                                                    : copied_config(source.config, "GPT2Tokenizer"));
      break;
    case Format::tiktoken:
      checkpoint::write_file_atomically((out / "tokenizer.json").string(),
                                        text::tokenizer_json(tokenizer.vocabulary));
      written.emplace_back("tokenizer.json");
      copy_companions(kTemplates);
      checkpoint::write_file_atomically(config, written_config(tokenizer, source.format, model_max_length));
      break;
  }
  written.emplace_back(kConfig);
  return written;
}

bool is_tokenizer_file(const std::string& name) {
  return name == "tokenizer.json" || name == kConfig || std::ranges::find(kCompanions, name) != kCompanions.end();
}

}  // namespace ampt::hf

#include "ampt/text/tokenizer_files.h"

#include "ampt/core/errors.h"
#include "ampt/text/hf_files.h"
#include "ampt/text/read_file.h"
#include "ampt/text/tiktoken_file.h"
#include "ampt/text/tokenizer_config.h"

#include <fmt/format.h>

#include <filesystem>
#include <system_error>
#include <vector>

namespace ampt::text {
namespace {

namespace fs = std::filesystem;

bool is_file(const fs::path& path) {
  std::error_code error;
  return fs::is_regular_file(path, error);
}

// The format of a tokenizer file named `file`.
TokenizerSource source_of(const fs::path& file) {
  const fs::path dir = file.parent_path();
  const std::string name = file.filename().string();
  TokenizerSource source;
  if (const fs::path config = dir / "tokenizer_config.json"; is_file(config)) source.config = config.string();
  if (name == "vocab.json" || name == "merges.txt") {
    const fs::path vocab = dir / "vocab.json";
    const fs::path merges = dir / "merges.txt";
    const fs::path& missing = is_file(vocab) ? merges : vocab;
    if (!is_file(missing)) {
      throw RuntimeError(fmt::format("{}: missing (GPT-2's vocab.json and merges.txt go together)",
                                     missing.string()));
    }
    source.format = TokenizerSource::Format::vocab_and_merges;
    source.file = vocab.string();
    source.merges = merges.string();
    return source;
  }
  source.file = file.string();
  if (file.extension() == ".tiktoken") {
    source.format = TokenizerSource::Format::tiktoken;
  } else if (file.extension() == ".json") {
    source.format = TokenizerSource::Format::tokenizer_json;
  } else {
    const std::string head = read_text_file(file.string()).substr(0, 1);
    source.format = head == "{" ? TokenizerSource::Format::tokenizer_json : TokenizerSource::Format::tiktoken;
  }
  return source;
}

}  // namespace

TokenizerSource locate_tokenizer(const std::string& path) {
  std::error_code error;
  const fs::file_status status = fs::status(path, error);
  if (!fs::exists(status)) throw RuntimeError(fmt::format("{}: tokenizer not found", path));
  if (!fs::is_directory(status)) return source_of(path);
  const fs::path dir(path);
  if (is_file(dir / "tokenizer.json")) return source_of(dir / "tokenizer.json");
  if (is_file(dir / "vocab.json") || is_file(dir / "merges.txt")) return source_of(dir / "vocab.json");
  std::vector<fs::path> tiktoken;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    if (entry.path().extension() == ".tiktoken" && is_file(entry.path())) tiktoken.push_back(entry.path());
  }
  if (tiktoken.size() == 1) return source_of(tiktoken.front());
  throw RuntimeError(fmt::format(
      "{}: {} (a tokenizer directory holds tokenizer.json, vocab.json + merges.txt, or one *.tiktoken)",
      path, tiktoken.empty() ? "no tokenizer files" : "more than one *.tiktoken file"));
}

bool holds_tokenizer(const std::string& dir) {
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    const auto name = entry.path().filename().string();
    if (name == "tokenizer.json" || name == "vocab.json" || name.ends_with(".tiktoken")) return true;
  }
  return false;
}

Vocabulary load_vocabulary(const std::string& path) {
  const TokenizerSource source = locate_tokenizer(path);
  Vocabulary vocabulary = source.format == TokenizerSource::Format::vocab_and_merges
                              ? read_vocab_and_merges(source.file, source.merges)
                          : source.format == TokenizerSource::Format::tiktoken
                              ? read_tiktoken(source.file)
                              : read_tokenizer_json(source.file);
  if (!source.config.empty()) read_tokenizer_config(source.config, vocabulary);
  return vocabulary;
}

Tokenizer load_tokenizer(const std::string& path) { return Tokenizer(load_vocabulary(path)); }

}  // namespace ampt::text

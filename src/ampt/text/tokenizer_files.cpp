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

Vocabulary read_files(const fs::path& file) {
  const fs::path dir = file.parent_path();
  const std::string name = file.filename().string();
  if (name == "vocab.json" || name == "merges.txt") {
    const fs::path vocab = dir / "vocab.json";
    const fs::path merges = dir / "merges.txt";
    const fs::path& missing = is_file(vocab) ? merges : vocab;
    if (!is_file(missing)) {
      throw RuntimeError(fmt::format("{}: missing (GPT-2's vocab.json and merges.txt go together)",
                                     missing.string()));
    }
    return read_vocab_and_merges(vocab.string(), merges.string());
  }
  if (file.extension() == ".tiktoken") return read_tiktoken(file.string());
  if (file.extension() == ".json") return read_tokenizer_json(file.string());
  const std::string head = read_text_file(file.string()).substr(0, 1);
  return head == "{" ? read_tokenizer_json(file.string()) : read_tiktoken(file.string());
}

// The tokenizer file, with the tokenizer_config.json beside it where there is one.
Vocabulary load_file(const fs::path& file) {
  Vocabulary vocabulary = read_files(file);
  if (const fs::path config = file.parent_path() / "tokenizer_config.json"; is_file(config)) {
    read_tokenizer_config(config.string(), vocabulary);
  }
  return vocabulary;
}

}  // namespace

Vocabulary load_vocabulary(const std::string& path) {
  std::error_code error;
  const fs::file_status status = fs::status(path, error);
  if (!fs::exists(status)) throw RuntimeError(fmt::format("{}: tokenizer not found", path));
  if (!fs::is_directory(status)) return load_file(path);
  const fs::path dir(path);
  if (is_file(dir / "tokenizer.json")) return load_file(dir / "tokenizer.json");
  if (is_file(dir / "vocab.json") || is_file(dir / "merges.txt")) return load_file(dir / "vocab.json");
  std::vector<fs::path> tiktoken;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    if (entry.path().extension() == ".tiktoken" && is_file(entry.path())) tiktoken.push_back(entry.path());
  }
  if (tiktoken.size() == 1) return load_file(tiktoken.front());
  throw RuntimeError(fmt::format(
      "{}: {} (a tokenizer directory holds tokenizer.json, vocab.json + merges.txt, or one *.tiktoken)",
      path, tiktoken.empty() ? "no tokenizer files" : "more than one *.tiktoken file"));
}

Tokenizer load_tokenizer(const std::string& path) { return Tokenizer(load_vocabulary(path)); }

}  // namespace ampt::text

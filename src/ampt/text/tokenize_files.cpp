#include "ampt/text/tokenize_files.h"

#include "ampt/core/errors.h"
#include "ampt/text/json_reader.h"
#include "ampt/text/read_file.h"

#include <fmt/format.h>

#include <string_view>

namespace ampt::text {
namespace {

// Documents encoded together by encode_batch: enough to keep every thread busy.
constexpr std::size_t kBatchBytes = std::size_t{16} << 20;

std::string document_text(const std::string& path, std::size_t line_number, std::string_view line) {
  JsonValue value;
  try {
    value = parse_json(line);
  } catch (const JsonError& e) {
    throw RuntimeError(fmt::format("{}: line {}: invalid JSON: {}", path, line_number, e.what()));
  }
  const JsonValue* text = value.find("text");
  if (text == nullptr || text->kind != JsonValue::Kind::string) {
    throw RuntimeError(fmt::format("{}: line {}: no string field \"text\"", path, line_number));
  }
  return text->string;
}

class Batcher {
 public:
  Batcher(const Tokenizer& tokenizer, const TokenizeFilesOptions& options,
          const std::function<void(std::span<const int32_t>)>& sink, TokenizeFilesStats& stats)
      : tokenizer_(tokenizer), options_(options), sink_(sink), stats_(stats) {}

  void add(std::string document) {
    bytes_ += document.size();
    documents_.push_back(std::move(document));
    if (bytes_ >= kBatchBytes) flush();
  }

  void flush() {
    const std::vector<std::string_view> views(documents_.begin(), documents_.end());
    const auto ids = tokenizer_.encode_batch(views, options_.threads, options_.specials);
    for (std::size_t i = 0; i < ids.size(); ++i) emit(documents_[i].size(), ids[i]);
    documents_.clear();
    bytes_ = 0;
  }

  void emit(std::size_t bytes, const std::vector<int32_t>& ids) {
    const int32_t eot = tokenizer_.eot_id();
    sink_(std::span(&eot, 1));
    sink_(ids);
    stats_.documents += 1;
    stats_.bytes += static_cast<int64_t>(bytes);
    stats_.tokens += static_cast<int64_t>(ids.size()) + 1;
  }

 private:
  const Tokenizer& tokenizer_;
  const TokenizeFilesOptions& options_;
  const std::function<void(std::span<const int32_t>)>& sink_;
  TokenizeFilesStats& stats_;
  std::vector<std::string> documents_;
  std::size_t bytes_ = 0;
};

}  // namespace

TokenizeFilesStats tokenize_files(const Tokenizer& tokenizer, const std::vector<std::string>& paths,
                                  const TokenizeFilesOptions& options,
                                  const std::function<void(std::span<const int32_t>)>& sink) {
  TokenizeFilesStats stats;
  Batcher batcher(tokenizer, options, sink, stats);
  for (const std::string& path : paths) {
    const std::string text = read_whole_file(path);
    if (!path.ends_with(".jsonl")) {
      batcher.flush();
      batcher.emit(text.size(), tokenizer.encode_parallel(text, options.threads, options.specials));
      continue;
    }
    for_each_line(text, [&](std::string_view line, std::size_t number) {
      if (line.find_first_not_of(" \t") != std::string_view::npos) {
        batcher.add(document_text(path, number, line));
      }
    });
  }
  batcher.flush();
  return stats;
}

}  // namespace ampt::text

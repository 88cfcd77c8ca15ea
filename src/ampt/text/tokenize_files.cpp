#include "ampt/text/tokenize_files.h"

#include "ampt/core/errors.h"
#include "ampt/text/json_lines.h"
#include "ampt/text/record_files.h"
#include "ampt/text/read_file.h"

#include <fmt/format.h>

#include <array>
#include <filesystem>
#include <string_view>
#include <system_error>

namespace ampt::text {
namespace {

// Documents encoded together by encode_batch: enough to keep every thread busy. A document this
// large is encoded alone, split across the threads.
constexpr std::size_t kDocumentBatchBytes = std::size_t{16} << 20;

std::string document_text(const JsonValue& record, const RecordPlace& place,
                          const std::string& field) {
  const JsonValue* text = record.find(field);
  if (text == nullptr || text->kind != JsonValue::Kind::string) {
    throw RuntimeError(fmt::format("{}: no string field \"{}\"", place.prefix(), field));
  }
  return text->string;
}

class Batcher {
 public:
  Batcher(const Tokenizer& tokenizer, const TokenizeFilesOptions& options,
          const std::function<void(std::span<const int32_t>)>& sink, int64_t total)
      : tokenizer_(tokenizer), options_(options), sink_(sink), total_(total) {}

  void add(std::string document, int64_t done) {
    if (document.size() >= kDocumentBatchBytes) {
      flush();
      emit(document.size(), tokenizer_.encode_parallel(document, options_.threads, options_.specials));
      report(done);
      return;
    }
    bytes_ += document.size();
    documents_.push_back(std::move(document));
    done_ = done;
    if (bytes_ >= kDocumentBatchBytes) flush();
  }

  void flush() {
    if (documents_.empty()) return;
    const std::vector<std::string_view> views(documents_.begin(), documents_.end());
    const auto ids = tokenizer_.encode_batch(views, options_.threads, options_.specials);
    for (std::size_t i = 0; i < ids.size(); ++i) emit(documents_[i].size(), ids[i]);
    documents_.clear();
    bytes_ = 0;
    report(done_);
  }

  // The last documents, and progress at its end (blank lines after the last document count).
  const TokenizeFilesStats& finish() {
    flush();
    report(total_);
    return stats_;
  }

 private:
  void emit(std::size_t bytes, const std::vector<int32_t>& ids) {
    const std::array<int32_t, 2> framing = {tokenizer_.eot_id(), tokenizer_.bos_id()};
    const std::size_t framed = framing[1] < 0 ? 1 : 2;
    sink_(std::span(framing).first(framed));
    sink_(ids);
    stats_.documents += 1;
    stats_.bytes += static_cast<int64_t>(bytes);
    stats_.tokens += static_cast<int64_t>(ids.size() + framed);
  }

  void report(int64_t done) const {
    if (options_.progress) options_.progress(done, total_);
  }

  const Tokenizer& tokenizer_;
  const TokenizeFilesOptions& options_;
  const std::function<void(std::span<const int32_t>)>& sink_;
  int64_t total_;
  TokenizeFilesStats stats_;
  std::vector<std::string> documents_;
  std::size_t bytes_ = 0;
  int64_t done_ = 0;
};

}  // namespace

bool is_record_file(const std::string& path, InputFormat format) {
  return format == InputFormat::records ||
         (format == InputFormat::by_extension &&
          (path.ends_with(".jsonl") || path.ends_with(".jsonl.gz") || is_table_file(path)));
}

int64_t input_bytes(const std::vector<std::string>& paths) {
  int64_t total = 0;
  for (const std::string& path : paths) {
    std::error_code error;
    const auto size = std::filesystem::file_size(path, error);
    if (!error) total += static_cast<int64_t>(size);
  }
  return total;
}

void read_documents(const std::vector<std::string>& paths, InputFormat format,
                    const std::string& text_field,
                    const std::function<void(std::string text, int64_t done)>& document) {
  int64_t before = 0;  // input bytes of the files already read
  for (const std::string& path : paths) {
    if (!is_record_file(path, format)) {
      std::string text = read_text_file(path);
      before += static_cast<int64_t>(text.size());
      document(std::move(text), before);
    } else {
      before += for_each_file_record(path, before,
                                     [&](const JsonValue& record, const RecordPlace& place, int64_t done) {
                                       document(document_text(record, place, text_field), done);
                                     });
    }
  }
}

TokenizeFilesStats tokenize_files(const Tokenizer& tokenizer, const std::vector<std::string>& paths,
                                  const TokenizeFilesOptions& options,
                                  const std::function<void(std::span<const int32_t>)>& sink) {
  Batcher batcher(tokenizer, options, sink, options.progress ? input_bytes(paths) : 0);
  read_documents(paths, options.format, options.text_field,
                 [&](std::string text, int64_t done) { batcher.add(std::move(text), done); });
  return batcher.finish();
}

}  // namespace ampt::text

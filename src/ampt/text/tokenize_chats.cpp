#include "ampt/text/tokenize_chats.h"

#include "ampt/core/errors.h"
#include "ampt/text/json_lines.h"
#include "ampt/text/read_file.h"

#include <fmt/format.h>

#include <map>

namespace ampt::text {
namespace {

// Content bytes of the examples encoded together: enough to keep every thread busy.
constexpr std::size_t kChatBatchBytes = std::size_t{4} << 20;

// The ids of template texts, each encoded once: a template has a handful of distinct pieces.
class TemplateIds {
 public:
  explicit TemplateIds(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}
  const std::vector<int32_t>& of(std::string_view text) {
    auto found = ids_.find(text);
    if (found == ids_.end()) {
      found = ids_.emplace(std::string(text), tokenizer_.encode(text, SpecialTokens::allowed)).first;
    }
    return found->second;
  }

 private:
  const Tokenizer& tokenizer_;
  std::map<std::string, std::vector<int32_t>, std::less<>> ids_;
};

// Appends the examples of `records` to ids and mask, their contents encoded on `threads` threads.
void encode_examples(const Tokenizer& tokenizer, const ChatTemplate& chat,
                     std::span<const std::vector<Turn>> records, int threads, TemplateIds& templates,
                     std::vector<int32_t>& ids, std::vector<uint8_t>& mask) {
  std::vector<std::vector<ChatPiece>> rendered;
  std::vector<std::string_view> contents;
  for (const auto& turns : records) {
    rendered.push_back(render_chat(chat, turns));
    for (const ChatPiece& piece : rendered.back()) {
      if (!piece.template_text) contents.push_back(piece.text);
    }
  }
  const auto content_ids = tokenizer.encode_batch(contents, threads, SpecialTokens::as_text);
  std::size_t next = 0;
  for (const auto& pieces : rendered) {
    const std::size_t first = ids.size();
    for (const ChatPiece& piece : pieces) {
      const std::vector<int32_t>& piece_ids =
          piece.template_text ? templates.of(piece.text) : content_ids[next++];
      ids.insert(ids.end(), piece_ids.begin(), piece_ids.end());
      mask.insert(mask.end(), piece_ids.size(), piece.scored ? kScoredToken : uint8_t{0});
    }
    if (ids.size() > first) mask[first] |= kExampleStart;
  }
}

}  // namespace

bool holds_chat_records(const std::vector<std::string>& paths, InputFormat format,
                        const std::string& text_field) {
  for (const std::string& path : paths) {
    if (!is_json_lines(path, format)) continue;
    const auto record = first_record(path);
    return record && is_chat_record(*record, text_field);
  }
  return false;
}

void encode_chat(const Tokenizer& tokenizer, const ChatTemplate& chat, const std::vector<Turn>& turns,
                 std::vector<int32_t>& ids, std::vector<uint8_t>& mask) {
  TemplateIds templates(tokenizer);
  encode_examples(tokenizer, chat, std::span(&turns, 1), 1, templates, ids, mask);
}

TokenizeFilesStats tokenize_chats(const Tokenizer& tokenizer, const ChatTemplate& chat,
                                  const std::vector<std::string>& paths,
                                  const TokenizeFilesOptions& options, const ChatSink& sink) {
  const int64_t total = options.progress ? input_bytes(paths) : 0;
  TemplateIds templates(tokenizer);
  TokenizeFilesStats stats;
  std::vector<std::vector<Turn>> records;
  std::size_t bytes = 0;
  int64_t done = 0;
  std::vector<int32_t> ids;
  std::vector<uint8_t> mask;
  const auto flush = [&] {
    if (records.empty()) return;
    ids.clear();
    mask.clear();
    encode_examples(tokenizer, chat, records, options.threads, templates, ids, mask);
    sink(ids, mask);
    stats.documents += static_cast<int64_t>(records.size());
    stats.bytes += static_cast<int64_t>(bytes);
    stats.tokens += static_cast<int64_t>(ids.size());
    records.clear();
    bytes = 0;
    if (options.progress) options.progress(done, total);
  };
  int64_t before = 0;
  for (const std::string& path : paths) {
    if (!is_json_lines(path, options.format)) {
      throw RuntimeError(fmt::format(
          "{}: not a .jsonl file: instruction records (prompt/completion or messages) are read "
          "from JSON Lines only",
          path));
    }
    const std::string text = read_text_file(path);
    for_each_record(path, text, before, [&](const JsonValue& record, const RecordPlace& place, int64_t end) {
      records.push_back(chat_turns(record, place));
      for (const Turn& turn : records.back()) bytes += turn.content.size();
      done = end;
      if (bytes >= kChatBatchBytes) flush();
    });
    before += static_cast<int64_t>(text.size());
  }
  flush();
  if (options.progress) options.progress(total, total);
  return stats;
}

}  // namespace ampt::text

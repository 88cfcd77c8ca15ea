#include "ampt/text/tokenize_chats.h"

#include "ampt/core/errors.h"
#include "ampt/text/json_lines.h"
#include "ampt/text/record_files.h"

#include <fmt/format.h>

#include <atomic>
#include <exception>
#include <map>
#include <optional>
#include <thread>

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

struct Example {
  std::vector<Turn> turns;                      // what a built-in template renders
  std::vector<std::string> parts;               // what a Jinja template rendered, each encoded whole
  std::vector<std::vector<ScoredSpan>> scored;  // per part
  bool preference = false;  // one answer of a preference record
  bool rejected = false;    // the rejected one
};

// Appends Jinja-rendered `examples`: each part encoded whole, special tokens recognised, as
// apply_chat_template(tokenize=True) encodes a chat (a preference record's prompt and answer are
// two parts, as TRL tokenizes them).
void encode_rendered(const Tokenizer& tokenizer, std::span<const Example> examples, int threads,
                     std::vector<int32_t>& ids, std::vector<uint8_t>& mask) {
  std::vector<std::string_view> texts;
  for (const auto& example : examples) texts.insert(texts.end(), example.parts.begin(), example.parts.end());
  const auto part_ids = tokenizer.encode_batch(texts, threads, SpecialTokens::allowed);
  std::size_t next = 0;
  for (const auto& example : examples) {
    const std::size_t first = ids.size();
    const uint8_t kind = example.rejected ? kRejectedExample : uint8_t{0};
    for (std::size_t p = 0; p < example.parts.size(); ++p) {
      const std::vector<int32_t>& these = part_ids[next++];
      const auto scored = scored_tokens(tokenizer, example.parts[p], these, example.scored[p]);
      ids.insert(ids.end(), these.begin(), these.end());
      for (const bool s : scored) mask.push_back(static_cast<uint8_t>((s ? kScoredToken : uint8_t{0}) | kind));
    }
    if (ids.size() > first) mask[first] |= kExampleStart;
  }
}

// A record rendered by the model's own template: an instruction record as one example, a
// conversational preference record as two (its prompt with the generation prompt, then each
// answer: what rendering the prompt and the answer adds to it, all scored).
void render_record(const Tokenizer& tokenizer, const JinjaChat& chat, const JsonValue& record,
                   PreferenceForm form, RecordShape shape, const RecordPlace& place,
                   std::vector<Example>& examples) {
  // The record's own errors name its place; the template's are given it here.
  const auto rendering = [&](const auto& render) {
    try {
      return render();
    } catch (const RuntimeError& e) {
      throw RuntimeError(fmt::format("{}: {}", place.prefix(), e.what()));
    }
  };
  if (form == PreferenceForm::none) {
    const ChatMessages messages = chat_messages(record, shape, place);
    RenderedChat rendered =
        rendering([&] { return render_jinja_chat(chat, tokenizer, messages.messages, messages.tools); });
    examples.push_back({{}, {std::move(rendered.text)}, {std::move(rendered.scored)}});
    return;
  }
  const PreferenceMessages pair = preference_messages(record, place);
  const std::string prompt = rendering([&] { return render_jinja_text(chat, pair.prompt, pair.tools, true); });
  for (const JsonValue* answer : {&pair.chosen, &pair.rejected}) {
    JsonValue messages = pair.prompt;
    messages.items.insert(messages.items.end(), answer->items.begin(), answer->items.end());
    const std::string whole = rendering([&] { return render_jinja_text(chat, messages, pair.tools, false); });
    if (!whole.starts_with(prompt)) {
      throw RuntimeError(fmt::format("{}: {} renders the prompt otherwise when an answer follows it, so the "
                                     "answer cannot be cut from it (as TRL cuts it)",
                                     place.prefix(), chat.file));
    }
    std::string rest = whole.substr(prompt.size());
    const std::size_t size = rest.size();
    examples.push_back({{}, {prompt, std::move(rest)}, {{}, {{0, size, false}}}, true, answer == &pair.rejected});
  }
}

// Appends `examples` to ids and mask, their contents encoded on `threads` threads.
void encode_examples(const Tokenizer& tokenizer, const ChatTemplate& chat,
                     std::span<const Example> examples, int threads, TemplateIds& templates,
                     std::vector<int32_t>& ids, std::vector<uint8_t>& mask) {
  std::vector<std::vector<ChatPiece>> rendered;
  std::vector<std::string_view> contents;
  for (const auto& example : examples) {
    rendered.push_back(render_chat(chat, example.turns));
    for (const ChatPiece& piece : rendered.back()) {
      if (!piece.template_text) contents.push_back(piece.text);
    }
  }
  const auto content_ids = tokenizer.encode_batch(contents, threads, SpecialTokens::as_text);
  std::size_t next = 0;
  for (std::size_t e = 0; e < rendered.size(); ++e) {
    const std::size_t first = ids.size();
    const uint8_t kind = examples[e].rejected ? kRejectedExample : uint8_t{0};
    // A preference answer is everything after its prompt, as TRL cuts it: ChatML's newline after
    // the end of turn too.
    bool answered = false;
    for (const ChatPiece& piece : rendered[e]) {
      const std::vector<int32_t>& piece_ids =
          piece.template_text ? templates.of(piece.text) : content_ids[next++];
      answered = answered || (examples[e].preference && piece.scored);
      ids.insert(ids.end(), piece_ids.begin(), piece_ids.end());
      mask.insert(mask.end(), piece_ids.size(),
                  static_cast<uint8_t>((piece.scored || answered ? kScoredToken : uint8_t{0}) | kind));
    }
    if (ids.size() > first) mask[first] |= kExampleStart;
  }
}

// A record read, waiting to be rendered with the others of its batch.
struct PendingRecord {
  JsonValue record;
  RecordPlace place;  // its path is one of tokenize_chats' paths, which outlive the batch
  PreferenceForm form;
};

// render_record of each of `pending` on `threads` threads (rendering is most of a Jinja
// template's cost), appended to `examples` in order; the first record's error in file order is
// thrown.
void render_pending(const Tokenizer& tokenizer, const JinjaChat& chat, std::span<const PendingRecord> pending,
                    RecordShape shape, int threads, std::vector<Example>& examples) {
  std::vector<std::vector<Example>> rendered(pending.size());
  std::vector<std::exception_ptr> errors(pending.size());
  std::atomic<std::size_t> next{0};
  const auto work = [&] {
    for (std::size_t i = next++; i < pending.size(); i = next++) {
      try {
        render_record(tokenizer, chat, pending[i].record, pending[i].form, shape, pending[i].place, rendered[i]);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  const auto workers = std::min<std::size_t>(static_cast<std::size_t>(resolve_threads(threads)), pending.size());
  std::vector<std::thread> pool;
  for (std::size_t t = 1; t < workers; ++t) pool.emplace_back(work);
  work();
  for (auto& thread : pool) thread.join();
  for (std::size_t i = 0; i < pending.size(); ++i) {
    if (errors[i]) std::rethrow_exception(errors[i]);
    for (Example& example : rendered[i]) examples.push_back(std::move(example));
  }
}

PreferenceForm form_of(const JsonValue& record) {
  if (!is_preference_record(record)) return PreferenceForm::none;
  const JsonValue* prompt = record.find("prompt");
  return prompt != nullptr && prompt->kind == JsonValue::Kind::array ? PreferenceForm::conversational
                                                                     : PreferenceForm::standard;
}

std::string_view form_name(PreferenceForm form) {
  switch (form) {
    case PreferenceForm::none: return "an instruction record";
    case PreferenceForm::standard: return "a standard preference record (strings)";
    case PreferenceForm::conversational: return "a conversational preference record (messages)";
  }
  return "?";
}

}  // namespace

bool holds_chat_records(const std::vector<std::string>& paths, InputFormat format,
                        const std::string& text_field) {
  for (const std::string& path : paths) {
    if (!is_record_file(path, format)) continue;
    const auto record = first_file_record(path);
    return record && (is_chat_record(*record, text_field) || is_preference_record(*record));
  }
  return false;
}

PreferenceForm preference_form(const std::vector<std::string>& paths, InputFormat format) {
  for (const std::string& path : paths) {
    if (!is_record_file(path, format)) continue;
    const auto record = first_file_record(path);
    return record ? form_of(*record) : PreferenceForm::none;
  }
  return PreferenceForm::none;
}

ChatTemplate records_template(const std::vector<std::string>& paths, InputFormat format,
                              const Tokenizer& tokenizer, const std::string& file,
                              const std::string& data, const std::string& kwargs) {
  if (preference_form(paths, format) == PreferenceForm::standard) {
    if (!file.empty() || !kwargs.empty()) {
      throw UsageError(fmt::format(
          "--{} renders conversational records, and {} holds standard preference "
          "records (strings), which are trained on as they are: drop it",
          file.empty() ? "chat_template_kwargs" : "chat_template", data));
    }
    return plain_chat_template(tokenizer);
  }
  std::optional<JinjaChat> jinja;
  if (file.ends_with(".jinja")) {
    jinja = read_jinja_chat(file, tokenizer, kwargs);
  } else if (file.empty()) {
    jinja = tokenizer_jinja_chat(tokenizer, kwargs);
  }
  if (jinja) {
    ChatTemplate chat;
    chat.name = jinja->file;
    chat.jinja = std::make_shared<const JinjaChat>(std::move(*jinja));
    return chat;
  }
  if (!kwargs.empty()) {
    throw UsageError(fmt::format("--chat_template_kwargs '{}' are passed to a Jinja chat template, and {} "
                                 "(the tokenizer of {}) has none: give it one, or pass --chat_template "
                                 "FILE.jinja",
                                 kwargs, tokenizer.source(), data));
  }
  return file.empty() ? builtin_chat_template(tokenizer) : read_chat_template(file);
}

void encode_chat(const Tokenizer& tokenizer, const ChatTemplate& chat, const std::vector<Turn>& turns,
                 std::vector<int32_t>& ids, std::vector<uint8_t>& mask) {
  TemplateIds templates(tokenizer);
  const Example example{turns, {}, {}};
  encode_examples(tokenizer, chat, std::span(&example, 1), 1, templates, ids, mask);
}

TokenizeFilesStats tokenize_chats(const Tokenizer& tokenizer, const ChatTemplate& chat,
                                  const std::vector<std::string>& paths,
                                  const TokenizeFilesOptions& options, const ChatSink& sink) {
  const int64_t total = options.progress ? input_bytes(paths) : 0;
  TemplateIds templates(tokenizer);
  TokenizeFilesStats stats;
  std::vector<Example> records;
  std::optional<PreferenceForm> form;  // the first record's
  std::optional<RecordShape> shape;    // the first instruction record's
  std::size_t bytes = 0;
  int64_t done = 0;
  std::vector<PendingRecord> pending;  // a Jinja template's, rendered at the flush
  std::vector<int32_t> ids;
  std::vector<uint8_t> mask;
  const auto flush = [&] {
    if (chat.jinja && !pending.empty()) {
      render_pending(tokenizer, *chat.jinja, pending, *shape, options.threads, records);
      pending.clear();
    }
    if (records.empty()) return;
    ids.clear();
    mask.clear();
    if (chat.jinja) {
      encode_rendered(tokenizer, records, options.threads, ids, mask);
    } else {
      encode_examples(tokenizer, chat, records, options.threads, templates, ids, mask);
    }
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
    if (!is_record_file(path, options.format)) {
      throw RuntimeError(fmt::format(
          "{}: not a record file: instruction records (prompt/completion or messages) are read "
          "from JSON Lines (.jsonl), Parquet and Arrow files",
          path));
    }
    before += for_each_file_record(path, before, [&](const JsonValue& record, const RecordPlace& place, int64_t end) {
      const PreferenceForm this_form = form_of(record);
      if (!form) form = this_form;
      if (this_form != *form) {
        throw RuntimeError(fmt::format("{}: {} after {}: the data holds one kind, as its first "
                                       "record says",
                                       place.prefix(), form_name(this_form), form_name(*form)));
      }
      if (!shape) shape = record_shape(record);
      if (chat.jinja) {
        pending.push_back({record, place, this_form});
        bytes += static_cast<std::size_t>(end - done);  // the record's line: its rendering is about as long
      } else if (this_form == PreferenceForm::none) {
        records.push_back({chat_turns(record, place), {}, {}});
      } else {
        auto pair = preference_turns(record, place);
        records.push_back({std::move(pair.chosen), {}, {}, true, false});
        records.push_back({std::move(pair.rejected), {}, {}, true, true});
      }
      if (!chat.jinja) {
        for (const Turn& turn : records.back().turns) bytes += 2 * turn.content.size();
      }
      done = end;
      if (bytes >= kChatBatchBytes) flush();
    });
  }
  flush();
  if (options.progress) options.progress(total, total);
  return stats;
}

}  // namespace ampt::text

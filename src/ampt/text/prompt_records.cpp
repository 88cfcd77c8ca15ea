#include "ampt/text/prompt_records.h"

#include "ampt/core/errors.h"
#include "ampt/text/chat_jinja.h"
#include "ampt/text/json_lines.h"
#include "ampt/text/record_files.h"

#include <fmt/format.h>

#include <optional>

namespace ampt::text {
namespace {

// A built-in template's prompt: its pieces, template text with its special tokens as ids and
// contents as plain text, then the assistant's prefix that starts the answer.
void encode_turns(const Tokenizer& tokenizer, const ChatTemplate& chat, const std::vector<Turn>& turns,
                  PromptRecord& out) {
  auto pieces = render_chat(chat, turns);
  if (!chat.assistant.prefix.empty()) pieces.push_back({chat.assistant.prefix, true, false});
  for (const ChatPiece& piece : pieces) {
    tokenizer.encode_append(piece.text, piece.template_text ? SpecialTokens::allowed : SpecialTokens::as_text,
                            out.ids);
    out.text += piece.text;
  }
}

}  // namespace

std::optional<int32_t> end_of_turn_token(const Tokenizer& tokenizer, const ChatTemplate& chat) {
  std::string after;  // the template's text after the assistant's content
  if (chat.jinja) {
    constexpr std::string_view content = "OK";
    const auto messages = parse_json(R"([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "OK"}])");
    std::string text;
    try {
      text = render_jinja_text(*chat.jinja, messages, JsonValue{}, /*generation_prompt=*/false);
    } catch (const RuntimeError&) {
      return std::nullopt;  // a template that renders no such chat: the tokenizer's EOS alone ends turns
    }
    const auto at = text.rfind(content);
    if (at == std::string::npos) return std::nullopt;
    after = text.substr(at + content.size());
  } else {
    after = chat.assistant.suffix;
  }
  for (const int32_t id : tokenizer.encode(after, SpecialTokens::allowed)) {
    if (tokenizer.is_special(id)) return id;
  }
  return std::nullopt;
}

PromptRecords read_prompt_records(const Tokenizer& tokenizer, const ChatTemplate& chat,
                                  const std::vector<std::string>& paths) {
  PromptRecords prompts;
  std::optional<PromptForm> first;
  const ChatTemplate plain = plain_chat_template(tokenizer);
  for (const std::string& path : paths) {
    const std::size_t before = prompts.records.size();
    for_each_file_record(path, 0, [&](const JsonValue& record, const RecordPlace& place, int64_t) {
      const PromptForm form = prompt_form(record, place);
      if (!first) first = form;
      if (form != *first) {
        throw RuntimeError(fmt::format("{}: the prompt is {}, and the first record's was {}: a prompt "
                                       "file holds one form",
                                       place.prefix(), prompt_form_name(form), prompt_form_name(*first)));
      }
      PromptRecord prompt;
      prompt.place = place.prefix();
      if (form == PromptForm::standard) {
        encode_turns(tokenizer, plain, {{Role::user, record.find("prompt")->string}}, prompt);
      } else if (chat.jinja) {
        const ChatMessages messages = prompt_messages(record, place);
        try {
          prompt.text = render_jinja_text(*chat.jinja, messages.messages, messages.tools, /*generation_prompt=*/true);
        } catch (const RuntimeError& e) {
          throw RuntimeError(fmt::format("{}: {}", place.prefix(), e.what()));
        }
        prompt.ids = tokenizer.encode(prompt.text, SpecialTokens::allowed);
      } else {
        encode_turns(tokenizer, chat, prompt_turns(record, place), prompt);
      }
      if (prompt.ids.empty()) {
        throw RuntimeError(fmt::format("{}: the prompt has no tokens: a completion needs a prompt to follow",
                                       place.prefix()));
      }
      prompt.record = record;
      prompts.records.push_back(std::move(prompt));
    });
    if (prompts.records.size() == before) {
      throw RuntimeError(fmt::format("{}: no prompt records (JSON Lines or a table, each record with a \"prompt\")", path));
    }
  }
  if (first) prompts.form = *first;
  if (prompts.form == PromptForm::conversational) prompts.end_of_turn = end_of_turn_token(tokenizer, chat);
  return prompts;
}

}  // namespace ampt::text

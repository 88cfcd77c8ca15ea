// A model's own chat template, the Jinja text its tokenizer carries (chat_template.jinja, or
// tokenizer_config.json's "chat_template"), applied as transformers' apply_chat_template applies
// it: the same variables (messages, tools, add_generation_prompt, the special tokens, template
// kwargs), the same text, and the assistant tokens it would mark.
#pragma once

#include "ampt/core/json_reader.h"
#include "ampt/text/jinja_template.h"
#include "ampt/text/tokenizer.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ampt::text {

struct JinjaChat {
  std::shared_ptr<const jinja::Template> templ;
  std::string file;             // where the template came from: what the startup line names
  jinja::ValueDict variables;   // bos_token, eos_token, unk_token, pad_token and the kwargs
  uint64_t fingerprint = 0;     // of the template text and the variables
};

// The tokenizer's own template: chat_template.jinja beside its file, else tokenizer_config.json's
// "chat_template" (a string, or a list of {"name", "template"} of which "default"); nullopt for
// none. `kwargs` is a JSON object of template kwargs (--chat_template_kwargs, e.g.
// {"enable_thinking": false}) or empty. Throws RuntimeError naming the file for a template that
// does not parse (jinja_template.h) or bad kwargs.
std::optional<JinjaChat> tokenizer_jinja_chat(const Tokenizer& tokenizer, const std::string& kwargs);

// A .jinja file (--chat_template), with the special tokens of the tokenizer's
// tokenizer_config.json.
JinjaChat read_jinja_chat(const std::string& path, const Tokenizer& tokenizer, const std::string& kwargs);

// A byte range of a rendered chat that the loss scores. `trim`: the range came from rendering the
// turn apart, and whitespace tokens after its last special token (ChatML's "\n" after
// <|im_end|>) are not the model's to say.
struct ScoredSpan {
  std::size_t begin = 0, end = 0;
  bool trim = false;
};

struct RenderedChat {
  std::string text;
  std::vector<ScoredSpan> scored;
};

// The conversation as apply_chat_template(messages, tools=tools) renders it (`messages` a JSON
// array of message objects, `tools` an array or null), and each assistant turn's span: its
// {% generation %} blocks where the template has them, else what rendering the conversation
// through the turn adds to rendering it up to the turn with the generation prompt: from where the
// two part, past what of the turn the rest of the prompt ends with (Mistral v0.3 puts the system
// prompt in the last user turn). Where the chat renders the turn otherwise, that text found whole
// after the previous turn, else, from where the chat and the generation prompt part, the longer
// of the turn's leading and trailing tokens that the chat holds there (Qwen3 drops an earlier
// turn's reasoning, Phi-3.5 ends the chat with the EOS). Throws
// RuntimeError naming the template and messages[i] for a role the template renders nothing for,
// a turn it renders so that its span cannot be found, and the template's own errors.
RenderedChat render_jinja_chat(const JinjaChat& chat, const Tokenizer& tokenizer, const JsonValue& messages,
                               const JsonValue& tools);

// The text of `messages`, with the generation prompt after them where `generation_prompt`.
std::string render_jinja_text(const JinjaChat& chat, const JsonValue& messages, const JsonValue& tools,
                              bool generation_prompt);

// Whether the loss scores each of `ids` (`text` encoded with special tokens): a token
// overlapping a span is scored.
std::vector<bool> scored_tokens(const Tokenizer& tokenizer, std::string_view text, std::span<const int32_t> ids,
                                const std::vector<ScoredSpan>& spans);

}  // namespace ampt::text

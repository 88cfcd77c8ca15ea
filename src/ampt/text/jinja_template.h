// A Jinja interpreter for the chat templates Hugging Face tokenizers carry (tokenizer_config.json's
// "chat_template", chat_template.jinja), rendering as transformers does: jinja2 with trim_blocks
// and lstrip_blocks, the loop controls (break, continue) and the {% generation %} block of
// transformers' AssistantTracker. What published templates use is here (jinja_builtins.h for the
// filters, tests and methods); anything else is refused when the template is read, naming the
// line and the construct.
#pragma once

#include "ampt/text/jinja_value.h"

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ampt::text::jinja {

struct Node;

// Byte ranges of the output that {% generation %} blocks rendered.
using Spans = std::vector<std::pair<std::size_t, std::size_t>>;

class Template {
 public:
  // Throws RuntimeError "NAME: line N: ..." for a syntax error or a construct the interpreter does
  // not have ({% include %}, an unknown filter or test).
  Template(std::string_view source, std::string name);

  // The text the template renders with `variables` (messages, add_generation_prompt, bos_token,
  // ...) over the globals raise_exception, strftime_now, namespace, range and dict. `generation`,
  // where given, receives the spans of {% generation %} blocks. Throws RuntimeError
  // "NAME: line N: ..." for an error while rendering, and for raise_exception("MESSAGE"):
  // "NAME: line N: the template refuses: MESSAGE".
  std::string render(const ValueDict& variables, Spans* generation = nullptr) const;

  const std::string& name() const { return name_; }
  // Whether the template has {% generation %} blocks, which then mark what the loss scores.
  bool marks_generation() const { return marks_generation_; }

 private:
  std::string name_;
  std::vector<std::shared_ptr<const Node>> body_;
  bool marks_generation_ = false;
};

}  // namespace ampt::text::jinja

#include "ampt/text/jinja_template.h"

#include "ampt/core/errors.h"
#include "ampt/text/jinja_evaluator.h"
#include "ampt/text/jinja_lexer.h"
#include "ampt/text/jinja_parser.h"

#include <fmt/format.h>

namespace ampt::text::jinja {

Template::Template(std::string_view source, std::string name) : name_(std::move(name)) {
  // jinja2 reads "\r\n" and "\r" as "\n", and drops the source's one trailing newline
  // (keep_trailing_newline is false).
  std::string text;
  text.reserve(source.size());
  for (std::size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      text += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      text += source[i];
    }
  }
  if (!text.empty() && text.back() == '\n') text.pop_back();
  try {
    auto parsed = parse(lex(text));
    body_ = std::move(parsed.body);
    marks_generation_ = parsed.marks_generation;
  } catch (const LineError& e) {
    throw RuntimeError(fmt::format("{}: line {}: {}", name_, e.line, e.message));
  }
}

std::string Template::render(const ValueDict& variables, Spans* generation) const {
  try {
    return jinja::render(body_, variables, generation);
  } catch (const LineError& e) {
    throw RuntimeError(fmt::format("{}: line {}: {}", name_, e.line, e.message));
  }
}

}  // namespace ampt::text::jinja

// The first stage of reading a chat template: its tokens, text between the tags and the names,
// literals and operators inside {{ }} and {% %} (comments dropped), with jinja2's whitespace
// control under trim_blocks and lstrip_blocks.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ampt::text::jinja {

// An error at a line of the template, from any stage (lexing, parsing, rendering); Template adds
// the template's name.
struct LineError {
  int line;
  std::string message;
};

enum class Tok { text, var_begin, var_end, block_begin, block_end, name, string, integer, floating, op, end };

struct Token {
  Tok type;
  std::string text;
  int line;
};

// The tokens of `source` (its newlines already "\n"), closed by one Tok::end. Throws LineError
// for a tag, comment or string never closed, a bad \x, \u or \U escape, or a character no
// expression has.
std::vector<Token> lex(std::string_view source);

}  // namespace ampt::text::jinja

// The second stage of reading a chat template: its tokens (jinja_lexer.h) into the syntax tree
// (jinja_evaluator.h), by jinja2's grammar and operator precedence. What a chat template may not
// use is refused here, by name: {% include %} and other statements, recursive loops, unpacking
// sets, and filters and tests jinja_builtins.h does not have.
#pragma once

#include "ampt/text/jinja_evaluator.h"
#include "ampt/text/jinja_lexer.h"

#include <vector>

namespace ampt::text::jinja {

struct Parsed {
  Body body;
  bool marks_generation = false;  // whether it has {% generation %} blocks
};

// Throws LineError for a syntax error or a construct the interpreter does not have.
Parsed parse(std::vector<Token> tokens);

}  // namespace ampt::text::jinja

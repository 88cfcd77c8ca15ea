// The last stage of a chat template: the syntax tree the parser builds (jinja_parser.h), each
// expression evaluating itself and each statement rendering itself, over jinja2's scopes (set
// writes the innermost frame; a macro call sees the template's top level) and its globals
// raise_exception, strftime_now, namespace, dict and range.
#pragma once

#include "ampt/text/jinja_template.h"
#include "ampt/text/jinja_value.h"

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace ampt::text::jinja {

// What a statement tells the loop around it.
enum class Flow { normal, break_loop, continue_loop };

struct Scope;   // the variables in scope
struct Output;  // the text rendered so far, and the {% generation %} spans

struct Expr {
  int line = 0;
  virtual ~Expr() = default;
  virtual Value eval(Scope& scope) const = 0;
};
using ExprPtr = std::shared_ptr<const Expr>;

struct Node {
  int line = 0;
  virtual ~Node() = default;
  virtual Flow render(Scope& scope, Output& out) const = 0;
};
using NodePtr = std::shared_ptr<const Node>;
using Body = std::vector<NodePtr>;

// The text `body` renders with `variables`; `generation`, where given, receives the spans of its
// {% generation %} blocks. Throws LineError (the line of the innermost statement) for an error,
// and for raise_exception("MESSAGE"): "the template refuses: MESSAGE".
std::string render(const Body& body, const ValueDict& variables, Spans* generation);

// ---------------------------------------------------------------------------------------------
// Expressions.

struct Literal : Expr {
  Value value;
  Value eval(Scope& scope) const override;
};

struct Name : Expr {
  std::string name;
  Value eval(Scope& scope) const override;
};

struct ListExpr : Expr {
  std::vector<ExprPtr> items;
  bool tuple = false;
  Value eval(Scope& scope) const override;
};

struct DictExpr : Expr {
  std::vector<std::pair<ExprPtr, ExprPtr>> items;
  Value eval(Scope& scope) const override;
};

struct GetAttr : Expr {
  ExprPtr object;
  std::string name;
  Value eval(Scope& scope) const override;
};

struct GetItem : Expr {
  ExprPtr object, key;
  Value eval(Scope& scope) const override;
};

struct Slice : Expr {
  ExprPtr object, start, stop, step;
  Value eval(Scope& scope) const override;
};

struct CallArgs {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> named;

  Arguments eval(Scope& scope) const;
};

struct Call : Expr {
  ExprPtr callee;
  CallArgs args;
  std::string callee_text;  // for errors
  Value eval(Scope& scope) const override;
};

struct FilterExpr : Expr {
  ExprPtr input;
  std::string name;
  CallArgs args;
  Value eval(Scope& scope) const override;
};

struct TestExpr : Expr {
  ExprPtr input;
  std::string name;
  CallArgs args;
  bool negated = false;
  Value eval(Scope& scope) const override;
};

struct Not : Expr {
  ExprPtr operand;
  Value eval(Scope& scope) const override;
};

struct Negate : Expr {
  ExprPtr operand;
  bool minus = true;
  Value eval(Scope& scope) const override;
};

struct Conditional : Expr {
  ExprPtr then, condition, otherwise;
  Value eval(Scope& scope) const override;
};

struct Binary : Expr {
  std::string op;
  ExprPtr left, right;
  Value eval(Scope& scope) const override;
};

// ---------------------------------------------------------------------------------------------
// Statements.

struct Text : Node {
  std::string text;
  Flow render(Scope& scope, Output& out) const override;
};

struct Print : Node {
  ExprPtr expr;
  Flow render(Scope& scope, Output& out) const override;
};

struct If : Node {
  std::vector<std::pair<ExprPtr, Body>> branches;  // a null condition: else
  Flow render(Scope& scope, Output& out) const override;
};

struct For : Node {
  std::vector<std::string> targets;
  ExprPtr iterable, filter;
  Body body, otherwise;
  Flow render(Scope& scope, Output& out) const override;

 private:
  void bind(Scope& scope, const Value& element) const;
};

struct Set : Node {
  std::string name, attr;  // attr: `set ns.attr = ...`
  ExprPtr value;           // null: a block set, whose body renders the value
  Body body;
  Flow render(Scope& scope, Output& out) const override;
};

struct LoopControl : Node {
  Flow flow = Flow::break_loop;
  Flow render(Scope& scope, Output& out) const override;
};

struct Generation : Node {
  Body body;
  Flow render(Scope& scope, Output& out) const override;
};

struct FilterBlock : Node {
  std::string name;
  CallArgs args;
  Body body;
  Flow render(Scope& scope, Output& out) const override;
};

struct Macro : Node {
  std::string name;
  std::vector<std::pair<std::string, ExprPtr>> params;  // defaults may be null
  Body body;
  Flow render(Scope& scope, Output& out) const override;
};

}  // namespace ampt::text::jinja

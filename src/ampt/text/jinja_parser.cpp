#include "ampt/text/jinja_parser.h"

#include "ampt/text/jinja_builtins.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>

namespace ampt::text::jinja {
namespace {

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  Parsed parse_template() {
    Parsed parsed{parse_nodes({}), false};
    if (peek().type != Tok::end) fail(fmt::format("unexpected {{% {} %}}", block_name()));
    parsed.marks_generation = marks_generation_;
    return parsed;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { throw LineError{peek().line, what}; }

  const Token& peek(std::size_t ahead = 0) const { return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)]; }
  const Token& next() { return tokens_[std::min(pos_++, tokens_.size() - 1)]; }

  bool at_op(std::string_view op) const { return peek().type == Tok::op && peek().text == op; }
  bool at_name(std::string_view name) const { return peek().type == Tok::name && peek().text == name; }

  void expect_op(std::string_view op) {
    if (!at_op(op)) fail(fmt::format("expected '{}', found {}", op, describe(peek())));
    ++pos_;
  }

  std::string expect_name() {
    if (peek().type != Tok::name) fail(fmt::format("expected a name, found {}", describe(peek())));
    return next().text;
  }

  void expect(Tok type, std::string_view what) {
    if (peek().type != type) fail(fmt::format("expected {}, found {}", what, describe(peek())));
    ++pos_;
  }

  static std::string describe(const Token& t) {
    switch (t.type) {
      case Tok::end: return "the end of the template";
      case Tok::block_end: return "'%}'";
      case Tok::var_end: return "'}}'";
      case Tok::text: return "text";
      case Tok::string: return "a string";
      default: return fmt::format("'{}'", t.text);
    }
  }

  // The name of the block statement at the current {%.
  std::string block_name() const { return peek(1).type == Tok::name ? peek(1).text : std::string(); }

  template <class T>
  std::shared_ptr<T> make(int line) {
    auto node = std::make_shared<T>();
    node->line = line;
    return node;
  }

  // Nodes up to a {% NAME %} whose NAME is in `ends` (left unread) or the end of the template.
  Body parse_nodes(std::initializer_list<std::string_view> ends) {
    Body body;
    while (true) {
      const Token& t = peek();
      if (t.type == Tok::end) return body;
      if (t.type == Tok::text) {
        auto node = make<Text>(t.line);
        node->text = next().text;
        body.push_back(node);
      } else if (t.type == Tok::var_begin) {
        ++pos_;
        auto node = make<Print>(t.line);
        node->expr = parse_expression();
        expect(Tok::var_end, "'}}'");
        body.push_back(node);
      } else {
        const std::string name = block_name();
        if (std::ranges::find(ends, name) != ends.end()) return body;
        body.push_back(parse_statement());
      }
    }
  }

  // Reads {% NAME %} (the end of a block).
  void end_tag(std::string_view name) {
    if (peek().type != Tok::block_begin || block_name() != name) {
      fail(fmt::format("expected {{% {} %}}, found {}", name,
                       peek().type == Tok::end ? "the end of the template" : "another tag"));
    }
    pos_ += 2;
    expect(Tok::block_end, "'%}'");
  }

  NodePtr parse_statement() {
    const int line = next().line;  // {%
    if (peek().type != Tok::name) fail("expected a statement after {%");
    const std::string keyword = next().text;
    if (keyword.starts_with("end") || keyword == "else" || keyword == "elif") {
      throw LineError{line, fmt::format("unexpected {{% {} %}}", keyword)};
    }
    if (keyword == "if") return parse_if(line);
    if (keyword == "for") return parse_for(line);
    if (keyword == "set") return parse_set(line);
    if (keyword == "macro") return parse_macro(line);
    if (keyword == "break" || keyword == "continue") {
      auto node = make<LoopControl>(line);
      node->flow = keyword == "break" ? Flow::break_loop : Flow::continue_loop;
      expect(Tok::block_end, "'%}'");
      return node;
    }
    if (keyword == "generation") {
      auto node = make<Generation>(line);
      expect(Tok::block_end, "'%}'");
      node->body = parse_nodes({"endgeneration"});
      end_tag("endgeneration");
      marks_generation_ = true;
      return node;
    }
    if (keyword == "filter") {
      auto node = make<FilterBlock>(line);
      node->name = filter_name();
      if (at_op("(")) node->args = parse_call_args();
      expect(Tok::block_end, "'%}'");
      node->body = parse_nodes({"endfilter"});
      end_tag("endfilter");
      return node;
    }
    throw LineError{line, fmt::format("{{% {} %}} is not supported in a chat template", keyword)};
  }

  NodePtr parse_if(int line) {
    auto node = make<If>(line);
    ExprPtr condition = parse_expression();
    expect(Tok::block_end, "'%}'");
    while (true) {
      Body body = parse_nodes({"elif", "else", "endif"});
      node->branches.emplace_back(condition, std::move(body));
      if (peek().type == Tok::end) fail("{% if %} is never closed by {% endif %}");
      const std::string name = block_name();
      pos_ += 2;
      if (name == "endif") {
        expect(Tok::block_end, "'%}'");
        return node;
      }
      if (name == "else") {
        expect(Tok::block_end, "'%}'");
        node->branches.emplace_back(nullptr, parse_nodes({"endif"}));
        end_tag("endif");
        return node;
      }
      condition = parse_expression();
      expect(Tok::block_end, "'%}'");
    }
  }

  NodePtr parse_for(int line) {
    auto node = make<For>(line);
    node->targets.push_back(expect_name());
    while (at_op(",")) {
      ++pos_;
      node->targets.push_back(expect_name());
    }
    if (!at_name("in")) fail(fmt::format("expected 'in' in a for loop, found {}", describe(peek())));
    ++pos_;
    node->iterable = parse_expression(false);
    if (at_name("if")) {
      ++pos_;
      node->filter = parse_expression(false);
    }
    if (at_name("recursive")) fail("recursive for loops are not supported in a chat template");
    expect(Tok::block_end, "'%}'");
    node->body = parse_nodes({"else", "endfor"});
    if (peek().type == Tok::block_begin && block_name() == "else") {
      pos_ += 2;
      expect(Tok::block_end, "'%}'");
      node->otherwise = parse_nodes({"endfor"});
    }
    end_tag("endfor");
    return node;
  }

  NodePtr parse_set(int line) {
    auto node = make<Set>(line);
    node->name = expect_name();
    if (at_op(".")) {
      ++pos_;
      node->attr = expect_name();
    }
    if (at_op(",")) fail("{% set a, b = ... %} (unpacking) is not supported in a chat template");
    if (at_op("=")) {
      ++pos_;
      node->value = parse_expression();
      expect(Tok::block_end, "'%}'");
      return node;
    }
    expect(Tok::block_end, "'=' or '%}'");
    node->body = parse_nodes({"endset"});
    end_tag("endset");
    return node;
  }

  NodePtr parse_macro(int line) {
    auto node = make<Macro>(line);
    node->name = expect_name();
    expect_op("(");
    while (!at_op(")")) {
      std::string param = expect_name();
      ExprPtr fallback;
      if (at_op("=")) {
        ++pos_;
        fallback = parse_expression();
      }
      node->params.emplace_back(std::move(param), fallback);
      if (!at_op(")")) expect_op(",");
    }
    ++pos_;
    expect(Tok::block_end, "'%}'");
    node->body = parse_nodes({"endmacro"});
    end_tag("endmacro");
    return node;
  }

  // -- expressions, by jinja2's precedence

  ExprPtr parse_expression(bool with_condition = true) {
    ExprPtr expr = parse_or();
    while (with_condition && at_name("if")) {
      const int line = next().line;
      auto node = make<Conditional>(line);
      node->then = expr;
      node->condition = parse_or();
      if (at_name("else")) {
        ++pos_;
        node->otherwise = parse_expression();
      }
      expr = node;
    }
    return expr;
  }

  ExprPtr binary(std::string op, ExprPtr left, ExprPtr right, int line) {
    auto node = make<Binary>(line);
    node->op = std::move(op);
    node->left = std::move(left);
    node->right = std::move(right);
    return node;
  }

  // A left-associative level of the binary operators `ops` (symbols, or the names "or" and
  // "and") over the level above it.
  ExprPtr binary_level(std::initializer_list<std::string_view> ops, ExprPtr (Parser::*operand)()) {
    ExprPtr left = (this->*operand)();
    while ((peek().type == Tok::op || peek().type == Tok::name) && std::ranges::find(ops, peek().text) != ops.end()) {
      const Token t = next();
      left = binary(t.text, left, (this->*operand)(), t.line);
    }
    return left;
  }

  ExprPtr parse_or() { return binary_level({"or"}, &Parser::parse_and); }
  ExprPtr parse_and() { return binary_level({"and"}, &Parser::parse_not); }

  ExprPtr parse_not() {
    if (at_name("not")) {
      auto node = make<Not>(next().line);
      node->operand = parse_not();
      return node;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    ExprPtr left = parse_math1();
    ExprPtr result;
    while (true) {
      std::string op;
      if (peek().type == Tok::op && (peek().text == "==" || peek().text == "!=" || peek().text == "<" ||
                                     peek().text == ">" || peek().text == "<=" || peek().text == ">=")) {
        op = next().text;
      } else if (at_name("in")) {
        ++pos_;
        op = "in";
      } else if (at_name("not") && peek(1).type == Tok::name && peek(1).text == "in") {
        pos_ += 2;
        op = "not in";
      } else {
        break;
      }
      const int line = peek().line;
      ExprPtr right = parse_math1();
      // a < b < c is (a < b) and (b < c).
      ExprPtr pair = binary(op, left, right, line);
      result = result ? binary("and", result, pair, line) : pair;
      left = right;
    }
    return result ? result : left;
  }

  ExprPtr parse_math1() { return binary_level({"+", "-"}, &Parser::parse_concat); }
  ExprPtr parse_concat() { return binary_level({"~"}, &Parser::parse_math2); }
  ExprPtr parse_math2() { return binary_level({"*", "/", "//", "%"}, &Parser::parse_pow); }
  ExprPtr parse_pow() { return binary_level({"**"}, &Parser::parse_filtered_unary); }
  ExprPtr parse_filtered_unary() { return parse_unary(true); }

  ExprPtr parse_unary(bool with_filter) {
    ExprPtr node;
    if (at_op("-") || at_op("+")) {
      auto negate = make<Negate>(peek().line);
      negate->minus = next().text == "-";
      negate->operand = parse_unary(false);
      node = negate;
    } else {
      node = parse_primary();
    }
    node = parse_postfix(node);
    return with_filter ? parse_filters(node) : node;
  }

  ExprPtr parse_primary() {
    const Token& t = peek();
    if (t.type == Tok::name) {
      ++pos_;
      auto literal = make<Literal>(t.line);
      if (t.text == "true" || t.text == "True") {
        literal->value = Value::boolean(true);
      } else if (t.text == "false" || t.text == "False") {
        literal->value = Value::boolean(false);
      } else if (t.text == "none" || t.text == "None") {
        literal->value = Value::none();
      } else {
        auto name = make<Name>(t.line);
        name->name = t.text;
        return name;
      }
      return literal;
    }
    if (t.type == Tok::string) {
      std::string text;
      while (peek().type == Tok::string) text += next().text;  // adjacent strings join
      auto literal = make<Literal>(t.line);
      literal->value = Value::string(std::move(text));
      return literal;
    }
    if (t.type == Tok::integer || t.type == Tok::floating) {
      ++pos_;
      auto literal = make<Literal>(t.line);
      if (t.type == Tok::integer) {
        int64_t i = 0;
        std::from_chars(t.text.data(), t.text.data() + t.text.size(), i);
        literal->value = Value::integer(i);
      } else {
        double f = 0;
        std::from_chars(t.text.data(), t.text.data() + t.text.size(), f);
        literal->value = Value::floating(f);
      }
      return literal;
    }
    if (at_op("(")) {
      ++pos_;
      if (at_op(")")) {
        ++pos_;
        auto empty = make<ListExpr>(t.line);
        empty->tuple = true;
        return empty;
      }
      ExprPtr first = parse_expression();
      if (at_op(")")) {
        ++pos_;
        return first;
      }
      auto tuple = make<ListExpr>(t.line);
      tuple->tuple = true;
      tuple->items.push_back(first);
      while (at_op(",")) {
        ++pos_;
        if (at_op(")")) break;
        tuple->items.push_back(parse_expression());
      }
      expect_op(")");
      return tuple;
    }
    if (at_op("[")) {
      ++pos_;
      auto list = make<ListExpr>(t.line);
      while (!at_op("]")) {
        list->items.push_back(parse_expression());
        if (!at_op("]")) expect_op(",");
      }
      ++pos_;
      return list;
    }
    if (at_op("{")) {
      ++pos_;
      auto dict = make<DictExpr>(t.line);
      while (!at_op("}")) {
        ExprPtr key = parse_expression();
        expect_op(":");
        dict->items.emplace_back(key, parse_expression());
        if (!at_op("}")) expect_op(",");
      }
      ++pos_;
      return dict;
    }
    fail(fmt::format("expected a value, found {}", describe(t)));
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      if (at_op(".")) {
        const int line = next().line;
        if (peek().type == Tok::integer) {
          auto get = make<GetItem>(line);
          get->object = node;
          auto key = make<Literal>(line);
          key->value = Value::integer(std::stoll(next().text));
          get->key = key;
          node = get;
          continue;
        }
        auto get = make<GetAttr>(line);
        get->object = node;
        get->name = expect_name();
        node = get;
      } else if (at_op("[")) {
        const int line = next().line;
        node = parse_subscript(node, line);
      } else if (at_op("(")) {
        const int line = peek().line;
        auto call = make<Call>(line);
        call->callee_text = callee_text(*node);
        call->callee = node;
        call->args = parse_call_args();
        node = call;
      } else {
        return node;
      }
    }
  }

  static std::string callee_text(const Expr& e) {
    if (const auto* n = dynamic_cast<const Name*>(&e)) return n->name;
    if (const auto* a = dynamic_cast<const GetAttr*>(&e)) return callee_text(*a->object) + "." + a->name;
    return "the expression";
  }

  ExprPtr parse_subscript(ExprPtr object, int line) {
    ExprPtr parts[3];
    int part = 0;
    bool is_slice = false;
    while (!at_op("]")) {
      if (at_op(":")) {
        ++pos_;
        if (++part > 2) fail("a slice has at most two ':'");
        is_slice = true;
        continue;
      }
      if (parts[part]) fail(fmt::format("expected ']' or ':', found {}", describe(peek())));
      parts[part] = parse_expression();
    }
    ++pos_;
    if (!is_slice) {
      if (!parts[0]) fail("an empty subscript []");
      auto get = make<GetItem>(line);
      get->object = object;
      get->key = parts[0];
      return get;
    }
    auto s = make<Slice>(line);
    s->object = object;
    s->start = parts[0];
    s->stop = parts[1];
    s->step = parts[2];
    return s;
  }

  CallArgs parse_call_args() {
    expect_op("(");
    CallArgs args;
    while (!at_op(")")) {
      if (peek().type == Tok::name && peek(1).type == Tok::op && peek(1).text == "=") {
        std::string key = next().text;
        ++pos_;
        args.named.emplace_back(std::move(key), parse_expression());
      } else {
        if (!args.named.empty()) fail("a positional argument after a name=value one");
        args.positional.push_back(parse_expression());
      }
      if (!at_op(")")) expect_op(",");
    }
    ++pos_;
    return args;
  }

  std::string filter_name() {
    std::string name = expect_name();
    while (at_op(".")) {  // jinja2 allows dotted filter names; none exist here
      ++pos_;
      name += "." + expect_name();
    }
    if (!has_filter(name)) fail(fmt::format("the filter '{}' is not supported in a chat template", name));
    return name;
  }

  ExprPtr parse_filters(ExprPtr node) {
    while (true) {
      if (at_op("|")) {
        const int line = next().line;
        auto filter = make<FilterExpr>(line);
        filter->input = node;
        filter->name = filter_name();
        if (at_op("(")) filter->args = parse_call_args();
        node = filter;
      } else if (at_name("is")) {
        const int line = next().line;
        auto test = make<TestExpr>(line);
        test->input = node;
        if (at_name("not")) {
          ++pos_;
          test->negated = true;
        }
        if (peek().type == Tok::name) {
          test->name = next().text;
        } else if (peek().type == Tok::op && (peek().text == "==" || peek().text == "!=" || peek().text == "<" ||
                                              peek().text == ">" || peek().text == "<=" || peek().text == ">=")) {
          test->name = next().text;
        } else {
          fail(fmt::format("expected a test name after 'is', found {}", describe(peek())));
        }
        if (!has_test(test->name)) fail(fmt::format("the test '{}' is not supported in a chat template", test->name));
        if (at_op("(")) {
          test->args = parse_call_args();
        } else if ((peek().type == Tok::name || peek().type == Tok::string || peek().type == Tok::integer ||
                    peek().type == Tok::floating || at_op("[") || at_op("{")) &&
                   !at_name("else") && !at_name("or") && !at_name("and") && !at_name("if") && !at_name("in") &&
                   !at_name("not") && !at_name("is")) {
          test->args.positional.push_back(parse_postfix(parse_primary()));
        }
        node = test;
      } else if (at_op("(")) {
        node = parse_postfix(node);
      } else {
        return node;
      }
    }
  }

  std::vector<Token> tokens_;
  std::size_t pos_ = 0;
  bool marks_generation_ = false;
};

}  // namespace

Parsed parse(std::vector<Token> tokens) {
  return Parser(std::move(tokens)).parse_template();
}

}  // namespace ampt::text::jinja

#include "ampt/text/jinja_template.h"

#include "ampt/core/errors.h"
#include "ampt/core/utf8_append.h"
#include "ampt/text/jinja_builtins.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <ctime>
#include <optional>
#include <unordered_map>

namespace ampt::text::jinja {
namespace {

// An error at a line of the template; render() and the constructor add the template's name.
struct LineError {
  int line;
  std::string message;
};

// ---------------------------------------------------------------------------------------------
// Lexing: text, {{ }}, {% %} (comments dropped), whitespace control as jinja2 with trim_blocks and
// lstrip_blocks does it.

enum class Tok { text, var_begin, var_end, block_begin, block_end, name, string, integer, floating, op, end };

struct Token {
  Tok type;
  std::string text;
  int line;
};

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

bool name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool name_char(char c) { return name_start(c) || (c >= '0' && c <= '9'); }

std::string unescape(std::string_view body, int line) {
  std::string out;
  for (std::size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '\\' || i + 1 == body.size()) {
      out += body[i];
      continue;
    }
    const char c = body[++i];
    switch (c) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case '\n': break;
      case 'x':
      case 'u':
      case 'U': {
        const std::size_t digits = c == 'x' ? 2 : c == 'u' ? 4 : 8;
        uint32_t code = 0;
        const auto [end, error] = std::from_chars(body.data() + i + 1, body.data() + std::min(body.size(), i + 1 + digits), code, 16);
        if (error != std::errc() || end != body.data() + i + 1 + digits) {
          throw LineError{line, fmt::format("a bad \\{} escape in a string", c)};
        }
        i += digits;
        append_utf8(out, static_cast<char32_t>(code));
        break;
      }
      default:  // Python keeps an unknown escape as written.
        out += '\\';
        out += c;
    }
  }
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string_view src) : src_(src) {}

  std::vector<Token> run() {
    bool line_starting = true;
    while (pos_ < src_.size()) {
      std::size_t open = pos_;
      while ((open = src_.find('{', open)) != std::string_view::npos) {
        if (open + 1 < src_.size() && (src_[open + 1] == '{' || src_[open + 1] == '%' || src_[open + 1] == '#')) break;
        ++open;
      }
      if (open == std::string_view::npos) {
        emit_text(src_.substr(pos_));
        break;
      }
      const char kind = src_[open + 1];
      const char sign = open + 2 < src_.size() ? src_[open + 2] : '\0';
      std::string_view text = src_.substr(pos_, open - pos_);
      if (sign == '-') {
        while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
      } else if (sign != '+' && kind != '{') {
        // lstrip_blocks: spaces and tabs between the line's start and a block or comment tag.
        const std::size_t last_newline = text.rfind('\n');
        const std::size_t line_start = last_newline == std::string_view::npos ? 0 : last_newline + 1;
        if ((line_start > 0 || line_starting) &&
            std::all_of(text.begin() + static_cast<std::ptrdiff_t>(line_start), text.end(), is_space)) {
          text = text.substr(0, line_start);
        }
      }
      emit_text(text);
      advance_to(open + 2 + (sign == '-' || sign == '+' ? 1 : 0));
      const std::size_t consumed_from = pos_;
      if (kind == '#') {
        const std::size_t close = src_.find("#}", pos_);
        if (close == std::string_view::npos) throw LineError{line_, "a comment {# is never closed by #}"};
        const bool strip = close > pos_ && src_[close - 1] == '-';
        advance_to(close + 2);
        finish_tag(strip, true);
      } else {
        lex_tag(kind);
      }
      line_starting = pos_ > consumed_from && src_[pos_ - 1] == '\n';
    }
    tokens_.push_back({Tok::end, "", line_});
    return std::move(tokens_);
  }

 private:
  void emit_text(std::string_view text) {
    if (!text.empty()) tokens_.push_back({Tok::text, std::string(text), line_});
  }

  void advance_to(std::size_t to) {
    line_ += static_cast<int>(std::count(src_.begin() + static_cast<std::ptrdiff_t>(pos_),
                                         src_.begin() + static_cast<std::ptrdiff_t>(to), '\n'));
    pos_ = to;
  }

  // After a closing tag: `-` strips the whitespace that follows; trim_blocks drops one newline
  // after a block or comment tag.
  void finish_tag(bool strip, bool block) {
    if (strip) {
      std::size_t to = pos_;
      while (to < src_.size() && is_space(src_[to])) ++to;
      advance_to(to);
    } else if (block && pos_ < src_.size() && src_[pos_] == '\n') {
      advance_to(pos_ + 1);
    }
  }

  void lex_tag(char kind) {
    const int line = line_;
    tokens_.push_back({kind == '{' ? Tok::var_begin : Tok::block_begin, "", line});
    int depth = 0;  // of brackets, so that a dict literal's "}}" does not close the tag
    while (true) {
      std::size_t to = pos_;
      while (to < src_.size() && is_space(src_[to])) ++to;
      advance_to(to);
      if (pos_ >= src_.size()) {
        throw LineError{line, kind == '{' ? "a {{ is never closed by }}" : "a {% is never closed by %}"};
      }
      const std::string_view rest = src_.substr(pos_);
      const std::string_view close = kind == '{' ? "}}" : "%}";
      if (depth == 0) {
        for (const char sign : {'-', '+', '\0'}) {
          if (sign == '+' && kind == '{') continue;
          const std::string with = sign == '\0' ? std::string(close) : std::string(1, sign) + std::string(close);
          if (rest.starts_with(with)) {
            tokens_.push_back({kind == '{' ? Tok::var_end : Tok::block_end, "", line_});
            advance_to(pos_ + with.size());
            finish_tag(sign == '-', kind == '%' && sign != '+');
            return;
          }
        }
      }
      lex_token(rest, depth);
    }
  }

  void lex_token(std::string_view rest, int& depth) {
    const char c = rest[0];
    if (name_start(c)) {
      std::size_t n = 1;
      while (n < rest.size() && name_char(rest[n])) ++n;
      push(Tok::name, rest.substr(0, n), n);
      return;
    }
    if (c >= '0' && c <= '9') {
      std::size_t n = 0;
      while (n < rest.size() && ((rest[n] >= '0' && rest[n] <= '9') || rest[n] == '_')) ++n;
      bool is_float = false;
      if (n + 1 < rest.size() && rest[n] == '.' && rest[n + 1] >= '0' && rest[n + 1] <= '9') {
        is_float = true;
        ++n;
        while (n < rest.size() && rest[n] >= '0' && rest[n] <= '9') ++n;
      }
      if (n < rest.size() && (rest[n] == 'e' || rest[n] == 'E')) {
        std::size_t m = n + 1;
        if (m < rest.size() && (rest[m] == '+' || rest[m] == '-')) ++m;
        if (m < rest.size() && rest[m] >= '0' && rest[m] <= '9') {
          is_float = true;
          n = m;
          while (n < rest.size() && rest[n] >= '0' && rest[n] <= '9') ++n;
        }
      }
      std::string digits(rest.substr(0, n));
      std::erase(digits, '_');
      tokens_.push_back({is_float ? Tok::floating : Tok::integer, digits, line_});
      advance_to(pos_ + n);
      return;
    }
    if (c == '\'' || c == '"') {
      std::size_t n = 1;
      while (n < rest.size() && rest[n] != c) n += rest[n] == '\\' ? 2 : 1;
      if (n >= rest.size()) throw LineError{line_, "a string is never closed"};
      tokens_.push_back({Tok::string, unescape(rest.substr(1, n - 1), line_), line_});
      advance_to(pos_ + n + 1);
      return;
    }
    for (const std::string_view op : {"//", "**", "==", "!=", "<=", ">="}) {
      if (rest.starts_with(op)) {
        push(Tok::op, op, op.size());
        return;
      }
    }
    if (std::string_view("+-*/%~|.,:()[]{}<>=").find(c) == std::string_view::npos) {
      throw LineError{line_, fmt::format("unexpected character '{}'", c)};
    }
    if (c == '(' || c == '[' || c == '{') ++depth;
    if (c == ')' || c == ']' || c == '}') --depth;
    push(Tok::op, rest.substr(0, 1), 1);
  }

  void push(Tok type, std::string_view text, std::size_t n) {
    tokens_.push_back({type, std::string(text), line_});
    advance_to(pos_ + n);
  }

  std::string_view src_;
  std::size_t pos_ = 0;
  int line_ = 1;
  std::vector<Token> tokens_;
};

// ---------------------------------------------------------------------------------------------
// Rendering state: the variables in scope, the output, loop control.

enum class Flow { normal, break_loop, continue_loop };

struct Scope;

struct Output {
  std::string text;
  Spans* generation = nullptr;
};

struct Expr {
  int line = 0;
  virtual ~Expr() = default;
  virtual Value eval(Scope& scope) const = 0;
};
using ExprPtr = std::shared_ptr<const Expr>;

}  // namespace

struct Node {
  int line = 0;
  virtual ~Node() = default;
  virtual Flow render(Scope& scope, Output& out) const = 0;
};

namespace {

using NodePtr = std::shared_ptr<const Node>;
using Body = std::vector<NodePtr>;

// Frames of variables: the root (the template's top level), one per loop iteration or macro
// call above it; `set` writes the innermost, as jinja2 scopes it. The render's variables and the
// globals come last.
struct Scope {
  const ValueDict* variables = nullptr;
  std::vector<std::unordered_map<std::string, Value>>* root = nullptr;  // shared with macro calls
  std::vector<std::unordered_map<std::string, Value>> frames;

  Value lookup(const std::string& name) const {
    for (auto frame = frames.rbegin(); frame != frames.rend(); ++frame) {
      if (const auto found = frame->find(name); found != frame->end()) return found->second;
    }
    for (auto frame = root->rbegin(); frame != root->rend(); ++frame) {
      if (const auto found = frame->find(name); found != frame->end()) return found->second;
    }
    if (const Value* found = variables->find(name)) return *found;
    return global(name);
  }

  void assign(const std::string& name, Value value) {
    (frames.empty() ? root->back() : frames.back())[name] = std::move(value);
  }

  static Value global(const std::string& name);
};

struct RaisedError {
  std::string message;
};

// Renders `body`; an error takes the line of the innermost statement it came from.
Flow render_body(const Body& body, Scope& scope, Output& out) {
  for (const NodePtr& node : body) {
    Flow flow = Flow::normal;
    try {
      flow = node->render(scope, out);
    } catch (const RaisedError& e) {
      throw LineError{node->line, "the template refuses: " + e.message};
    } catch (const RuntimeError& e) {
      throw LineError{node->line, e.what()};
    }
    if (flow != Flow::normal) return flow;
  }
  return Flow::normal;
}

Value Scope::global(const std::string& name) {
  static const std::unordered_map<std::string, Value> globals = [] {
    std::unordered_map<std::string, Value> g;
    g["raise_exception"] = Value::function("raise_exception", [](Arguments& a) -> Value {
      throw RaisedError{argument(a, 0, "message").str()};
    });
    g["strftime_now"] = Value::function("strftime_now", [](Arguments& a) {
      const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
      std::tm local{};
      localtime_r(&now, &local);
      char buffer[256];
      const std::size_t n = std::strftime(buffer, sizeof buffer, argument(a, 0, "format").str().c_str(), &local);
      return Value::string(std::string(buffer, n));
    });
    g["namespace"] = Value::function("namespace", [](Arguments& a) {
      ValueDict items;
      for (const Value& p : a.positional) {
        if (!p.is_mapping()) throw RuntimeError("namespace() takes a dict and name=value arguments");
        for (const auto& [k, v] : p.as_dict().items) items.set(k, v);
      }
      for (const auto& [k, v] : a.named) items.set(Value::string(k), v);
      return Value::names(std::move(items));
    });
    g["dict"] = Value::function("dict", [](Arguments& a) {
      ValueDict items;
      for (const auto& [k, v] : a.named) items.set(Value::string(k), v);
      return Value::dict(std::move(items));
    });
    g["range"] = Value::function("range", [](Arguments& a) {
      std::vector<int64_t> n;
      for (const Value& v : a.positional) {
        if (v.kind() != Value::Kind::integer) throw RuntimeError("range() takes ints");
        n.push_back(v.as_int());
      }
      if (n.empty() || n.size() > 3) throw RuntimeError("range() takes 1 to 3 ints");
      const int64_t start = n.size() == 1 ? 0 : n[0];
      const int64_t stop = n.size() == 1 ? n[0] : n[1];
      const int64_t step = n.size() == 3 ? n[2] : 1;
      if (step == 0) throw RuntimeError("range() step cannot be zero");
      ValueList out;
      for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) out.push_back(Value::integer(i));
      return Value::list(std::move(out));
    });
    return g;
  }();
  const auto found = globals.find(name);
  return found != globals.end() ? found->second : Value();
}

// ---------------------------------------------------------------------------------------------
// Expressions.

struct Literal : Expr {
  Value value;
  Value eval(Scope&) const override { return value; }
};

struct Name : Expr {
  std::string name;
  Value eval(Scope& scope) const override { return scope.lookup(name); }
};

struct ListExpr : Expr {
  std::vector<ExprPtr> items;
  bool tuple = false;
  Value eval(Scope& scope) const override {
    ValueList out;
    out.reserve(items.size());
    for (const auto& e : items) out.push_back(e->eval(scope));
    return tuple ? Value::tuple(std::move(out)) : Value::list(std::move(out));
  }
};

struct DictExpr : Expr {
  std::vector<std::pair<ExprPtr, ExprPtr>> items;
  Value eval(Scope& scope) const override {
    ValueDict out;
    for (const auto& [k, v] : items) out.set(k->eval(scope), v->eval(scope));
    return Value::dict(std::move(out));
  }
};

struct GetAttr : Expr {
  ExprPtr object;
  std::string name;
  Value eval(Scope& scope) const override { return attribute(object->eval(scope), name); }
};

struct GetItem : Expr {
  ExprPtr object, key;
  Value eval(Scope& scope) const override { return item(object->eval(scope), key->eval(scope)); }
};

struct Slice : Expr {
  ExprPtr object, start, stop, step;
  Value eval(Scope& scope) const override {
    const auto bound = [&](const ExprPtr& e) -> std::optional<int64_t> {
      if (!e) return std::nullopt;
      const Value v = e->eval(scope);
      if (v.is_none()) return std::nullopt;
      if (v.kind() != Value::Kind::integer) throw RuntimeError("slice indices must be ints");
      return v.as_int();
    };
    const Value value = object->eval(scope);
    return slice(value, bound(start), bound(stop), bound(step));
  }
};

struct CallArgs {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> named;

  Arguments eval(Scope& scope) const {
    Arguments args;
    for (const auto& e : positional) args.positional.push_back(e->eval(scope));
    for (const auto& [k, e] : named) args.named.emplace_back(k, e->eval(scope));
    return args;
  }
};

struct Call : Expr {
  ExprPtr callee;
  CallArgs args;
  std::string callee_text;  // for errors
  Value eval(Scope& scope) const override {
    const Value f = callee->eval(scope);
    if (f.kind() != Value::Kind::function) {
      throw RuntimeError(fmt::format("'{}' is {}, not something to call", callee_text, f.type_name()));
    }
    Arguments a = args.eval(scope);
    return f.call(a);
  }
};

struct FilterExpr : Expr {
  ExprPtr input;
  std::string name;
  CallArgs args;
  Value eval(Scope& scope) const override {
    const Value v = input->eval(scope);
    Arguments a = args.eval(scope);
    return apply_filter(name, v, a);
  }
};

struct TestExpr : Expr {
  ExprPtr input;
  std::string name;
  CallArgs args;
  bool negated = false;
  Value eval(Scope& scope) const override {
    const Value v = input->eval(scope);
    Arguments a = args.eval(scope);
    return Value::boolean(apply_test(name, v, a) != negated);
  }
};

struct Not : Expr {
  ExprPtr operand;
  Value eval(Scope& scope) const override { return Value::boolean(!operand->eval(scope).truthy()); }
};

struct Negate : Expr {
  ExprPtr operand;
  bool minus = true;
  Value eval(Scope& scope) const override {
    const Value v = operand->eval(scope);
    if (v.kind() == Value::Kind::integer) return Value::integer(minus ? -v.as_int() : v.as_int());
    if (v.kind() == Value::Kind::floating) return Value::floating(minus ? -v.as_double() : v.as_double());
    throw RuntimeError(fmt::format("bad operand for unary {}: {}", minus ? '-' : '+', v.type_name()));
  }
};

struct Conditional : Expr {
  ExprPtr then, condition, otherwise;
  Value eval(Scope& scope) const override {
    if (condition->eval(scope).truthy()) return then->eval(scope);
    return otherwise ? otherwise->eval(scope) : Value();
  }
};

int64_t floor_div(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

Value arithmetic(const std::string& op, const Value& a, const Value& b) {
  const auto fail = [&]() -> Value {
    throw RuntimeError(fmt::format("unsupported operand types for {}: {} and {}", op, a.type_name(), b.type_name()));
  };
  if (op == "~") return Value::string(a.str() + b.str());
  if (op == "+") {
    if (a.is_string() && b.is_string()) return Value::string(a.as_string() + b.as_string());
    if (a.is_list() && b.is_list()) {
      ValueList out = a.as_list();
      out.insert(out.end(), b.as_list().begin(), b.as_list().end());
      return Value::list(std::move(out));
    }
  }
  if (op == "*" && (a.is_string() || b.is_string())) {
    const Value& s = a.is_string() ? a : b;
    const Value& n = a.is_string() ? b : a;
    if (n.kind() != Value::Kind::integer) return fail();
    std::string out;
    for (int64_t i = 0; i < n.as_int(); ++i) out += s.as_string();
    return Value::string(std::move(out));
  }
  const auto numeric = [](const Value& v) { return v.is_number() || v.kind() == Value::Kind::boolean; };
  if (!numeric(a) || !numeric(b)) return fail();
  const auto as_int = [](const Value& v) { return v.kind() == Value::Kind::boolean ? int64_t{v.as_bool()} : v.as_int(); };
  const auto as_f = [](const Value& v) { return v.kind() == Value::Kind::boolean ? double(v.as_bool()) : v.as_double(); };
  const bool ints = a.kind() != Value::Kind::floating && b.kind() != Value::Kind::floating;
  if (op == "/") {
    if (as_f(b) == 0) throw RuntimeError("division by zero");
    return Value::floating(as_f(a) / as_f(b));
  }
  if (ints) {
    const int64_t x = as_int(a), y = as_int(b);
    if (op == "+") return Value::integer(x + y);
    if (op == "-") return Value::integer(x - y);
    if (op == "*") return Value::integer(x * y);
    if (op == "//" || op == "%") {
      if (y == 0) throw RuntimeError("integer division or modulo by zero");
      return Value::integer(op == "//" ? floor_div(x, y) : x - floor_div(x, y) * y);
    }
    if (op == "**" && y >= 0) {
      int64_t r = 1;
      for (int64_t i = 0; i < y; ++i) r *= x;
      return Value::integer(r);
    }
  }
  const double x = as_f(a), y = as_f(b);
  if (op == "+") return Value::floating(x + y);
  if (op == "-") return Value::floating(x - y);
  if (op == "*") return Value::floating(x * y);
  if (op == "**") return Value::floating(std::pow(x, y));
  if (y == 0) throw RuntimeError("float division or modulo by zero");
  const double q = std::floor(x / y);
  return Value::floating(op == "//" ? q : x - q * y);
}

struct Binary : Expr {
  std::string op;
  ExprPtr left, right;
  Value eval(Scope& scope) const override {
    if (op == "and") {
      Value l = left->eval(scope);
      return l.truthy() ? right->eval(scope) : l;
    }
    if (op == "or") {
      Value l = left->eval(scope);
      return l.truthy() ? l : right->eval(scope);
    }
    const Value l = left->eval(scope);
    const Value r = right->eval(scope);
    if (op == "==") return Value::boolean(equal(l, r));
    if (op == "!=") return Value::boolean(!equal(l, r));
    if (op == "<") return Value::boolean(less(l, r));
    if (op == ">") return Value::boolean(less(r, l));
    if (op == "<=") return Value::boolean(!less(r, l));
    if (op == ">=") return Value::boolean(!less(l, r));
    if (op == "in") return Value::boolean(contains(r, l));
    if (op == "not in") return Value::boolean(!contains(r, l));
    return arithmetic(op, l, r);
  }
};

// ---------------------------------------------------------------------------------------------
// Statements.

struct Text : Node {
  std::string text;
  Flow render(Scope&, Output& out) const override {
    out.text += text;
    return Flow::normal;
  }
};

struct Print : Node {
  ExprPtr expr;
  Flow render(Scope& scope, Output& out) const override {
    out.text += expr->eval(scope).str();
    return Flow::normal;
  }
};

struct If : Node {
  std::vector<std::pair<ExprPtr, Body>> branches;  // a null condition: else
  Flow render(Scope& scope, Output& out) const override {
    for (const auto& [condition, body] : branches) {
      if (!condition || condition->eval(scope).truthy()) return render_body(body, scope, out);
    }
    return Flow::normal;
  }
};

Value loop_object(std::size_t i, const ValueList& items) {
  const auto n = static_cast<int64_t>(items.size());
  const auto k = static_cast<int64_t>(i);
  ValueDict loop;
  loop.items.reserve(9);
  loop.items.emplace_back(Value::string("index0"), Value::integer(k));
  loop.items.emplace_back(Value::string("index"), Value::integer(k + 1));
  loop.items.emplace_back(Value::string("revindex0"), Value::integer(n - k - 1));
  loop.items.emplace_back(Value::string("revindex"), Value::integer(n - k));
  loop.items.emplace_back(Value::string("first"), Value::boolean(i == 0));
  loop.items.emplace_back(Value::string("last"), Value::boolean(k == n - 1));
  loop.items.emplace_back(Value::string("length"), Value::integer(n));
  loop.items.emplace_back(Value::string("previtem"), i > 0 ? items[i - 1] : Value());
  loop.items.emplace_back(Value::string("nextitem"), k + 1 < n ? items[i + 1] : Value());
  return Value::names(std::move(loop));
}

struct For : Node {
  std::vector<std::string> targets;
  ExprPtr iterable, filter;
  Body body, otherwise;

  void bind(Scope& scope, const Value& element) const {
    if (targets.size() == 1) {
      scope.frames.back()[targets[0]] = element;
      return;
    }
    const ValueList parts = iterate(element);
    if (parts.size() != targets.size()) {
      throw RuntimeError(fmt::format("cannot unpack {} values into {} loop variables", parts.size(), targets.size()));
    }
    for (std::size_t t = 0; t < targets.size(); ++t) scope.frames.back()[targets[t]] = parts[t];
  }

  Flow render(Scope& scope, Output& out) const override {
    ValueList items = iterate(iterable->eval(scope));
    if (filter) {
      ValueList kept;
      scope.frames.emplace_back();
      for (const Value& element : items) {
        bind(scope, element);
        if (filter->eval(scope).truthy()) kept.push_back(element);
      }
      scope.frames.pop_back();
      items = std::move(kept);
    }
    if (items.empty()) return render_body(otherwise, scope, out);
    for (std::size_t i = 0; i < items.size(); ++i) {
      scope.frames.emplace_back();
      bind(scope, items[i]);
      scope.frames.back()["loop"] = loop_object(i, items);
      const Flow flow = render_body(body, scope, out);
      scope.frames.pop_back();
      if (flow == Flow::break_loop) break;
    }
    return Flow::normal;
  }
};

struct Set : Node {
  std::string name, attr;  // attr: `set ns.attr = ...`
  ExprPtr value;           // null: a block set, whose body renders the value
  Body body;
  Flow render(Scope& scope, Output&) const override {
    Value v;
    if (value) {
      v = value->eval(scope);
    } else {
      Output inner;
      render_body(body, scope, inner);
      v = Value::string(std::move(inner.text));
    }
    if (attr.empty()) {
      scope.assign(name, std::move(v));
      return Flow::normal;
    }
    const Value target = scope.lookup(name);
    if (target.kind() != Value::Kind::names) {
      throw RuntimeError(fmt::format("cannot set '{}.{}': {} is {}, not a namespace()", name, attr, name, target.type_name()));
    }
    target.names_dict().set(Value::string(attr), std::move(v));
    return Flow::normal;
  }
};

struct LoopControl : Node {
  Flow flow = Flow::break_loop;
  Flow render(Scope&, Output&) const override { return flow; }
};

struct Generation : Node {
  Body body;
  Flow render(Scope& scope, Output& out) const override {
    const std::size_t start = out.text.size();
    const Flow flow = render_body(body, scope, out);
    if (out.generation != nullptr) out.generation->emplace_back(start, out.text.size());
    return flow;
  }
};

struct FilterBlock : Node {
  std::string name;
  CallArgs args;
  Body body;
  Flow render(Scope& scope, Output& out) const override {
    Output inner;
    render_body(body, scope, inner);
    Arguments a = args.eval(scope);
    out.text += apply_filter(name, Value::string(std::move(inner.text)), a).str();
    return Flow::normal;
  }
};

struct Macro : Node {
  std::string name;
  std::vector<std::pair<std::string, ExprPtr>> params;  // defaults may be null
  Body body;
  Flow render(Scope& scope, Output&) const override {
    // A macro's function lives no longer than the render, and the template outlives that.
    const Macro* self = this;
    const ValueDict* variables = scope.variables;
    auto* root = scope.root;
    scope.assign(name, Value::function(name, [self, variables, root](Arguments& args) {
      Scope call{variables, root, {}};
      call.frames.emplace_back();
      auto& frame = call.frames.back();
      if (args.positional.size() > self->params.size()) {
        throw RuntimeError(fmt::format("macro '{}' takes {} arguments, not {}", self->name, self->params.size(), args.positional.size()));
      }
      for (std::size_t i = 0; i < self->params.size(); ++i) {
        const auto& [param, fallback] = self->params[i];
        if (i < args.positional.size()) {
          frame[param] = args.positional[i];
        } else {
          frame[param] = fallback ? fallback->eval(call) : Value();
        }
      }
      for (const auto& [key, value] : args.named) {
        if (std::ranges::none_of(self->params, [&](const auto& p) { return p.first == key; })) {
          throw RuntimeError(fmt::format("macro '{}' has no argument '{}'", self->name, key));
        }
        frame[key] = value;
      }
      Output out;
      render_body(self->body, call, out);
      return Value::string(std::move(out.text));
    }));
    return Flow::normal;
  }
};

// ---------------------------------------------------------------------------------------------
// Parsing.

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  Body parse_template(bool& marks_generation) {
    Body body = parse_nodes({});
    if (peek().type != Tok::end) fail(fmt::format("unexpected {{% {} %}}", block_name()));
    marks_generation = marks_generation_;
    return body;
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
    Parser parser(Lexer(text).run());
    body_ = parser.parse_template(marks_generation_);
  } catch (const LineError& e) {
    throw RuntimeError(fmt::format("{}: line {}: {}", name_, e.line, e.message));
  }
}

std::string Template::render(const ValueDict& variables, Spans* generation) const {
  std::vector<std::unordered_map<std::string, Value>> root(1);
  Scope scope{&variables, &root, {}};
  Output out;
  out.generation = generation;
  try {
    render_body(body_, scope, out);
  } catch (const LineError& e) {
    throw RuntimeError(fmt::format("{}: line {}: {}", name_, e.line, e.message));
  }
  return std::move(out.text);
}

}  // namespace ampt::text::jinja

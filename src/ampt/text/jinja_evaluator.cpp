#include "ampt/text/jinja_evaluator.h"

#include "ampt/core/errors.h"
#include "ampt/text/jinja_builtins.h"
#include "ampt/text/jinja_lexer.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <optional>
#include <unordered_map>

namespace ampt::text::jinja {

struct Output {
  std::string text;
  Spans* generation = nullptr;
};

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

namespace {

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

}  // namespace

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

std::string render(const Body& body, const ValueDict& variables, Spans* generation) {
  std::vector<std::unordered_map<std::string, Value>> root(1);
  Scope scope{&variables, &root, {}};
  Output out;
  out.generation = generation;
  render_body(body, scope, out);
  return std::move(out.text);
}

// ---------------------------------------------------------------------------------------------
// Expressions.

Value Literal::eval(Scope&) const { return value; }

Value Name::eval(Scope& scope) const { return scope.lookup(name); }

Value ListExpr::eval(Scope& scope) const {
  ValueList out;
  out.reserve(items.size());
  for (const auto& e : items) out.push_back(e->eval(scope));
  return tuple ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

Value DictExpr::eval(Scope& scope) const {
  ValueDict out;
  for (const auto& [k, v] : items) out.set(k->eval(scope), v->eval(scope));
  return Value::dict(std::move(out));
}

Value GetAttr::eval(Scope& scope) const { return attribute(object->eval(scope), name); }

Value GetItem::eval(Scope& scope) const { return item(object->eval(scope), key->eval(scope)); }

Value Slice::eval(Scope& scope) const {
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

Arguments CallArgs::eval(Scope& scope) const {
  Arguments args;
  for (const auto& e : positional) args.positional.push_back(e->eval(scope));
  for (const auto& [k, e] : named) args.named.emplace_back(k, e->eval(scope));
  return args;
}

Value Call::eval(Scope& scope) const {
  const Value f = callee->eval(scope);
  if (f.kind() != Value::Kind::function) {
    throw RuntimeError(fmt::format("'{}' is {}, not something to call", callee_text, f.type_name()));
  }
  Arguments a = args.eval(scope);
  return f.call(a);
}

Value FilterExpr::eval(Scope& scope) const {
  const Value v = input->eval(scope);
  Arguments a = args.eval(scope);
  return apply_filter(name, v, a);
}

Value TestExpr::eval(Scope& scope) const {
  const Value v = input->eval(scope);
  Arguments a = args.eval(scope);
  return Value::boolean(apply_test(name, v, a) != negated);
}

Value Not::eval(Scope& scope) const { return Value::boolean(!operand->eval(scope).truthy()); }

Value Negate::eval(Scope& scope) const {
  const Value v = operand->eval(scope);
  if (v.kind() == Value::Kind::integer) return Value::integer(minus ? -v.as_int() : v.as_int());
  if (v.kind() == Value::Kind::floating) return Value::floating(minus ? -v.as_double() : v.as_double());
  throw RuntimeError(fmt::format("bad operand for unary {}: {}", minus ? '-' : '+', v.type_name()));
}

Value Conditional::eval(Scope& scope) const {
  if (condition->eval(scope).truthy()) return then->eval(scope);
  return otherwise ? otherwise->eval(scope) : Value();
}

namespace {

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

}  // namespace

Value Binary::eval(Scope& scope) const {
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

// ---------------------------------------------------------------------------------------------
// Statements.

Flow Text::render(Scope&, Output& out) const {
  out.text += text;
  return Flow::normal;
}

Flow Print::render(Scope& scope, Output& out) const {
  out.text += expr->eval(scope).str();
  return Flow::normal;
}

Flow If::render(Scope& scope, Output& out) const {
  for (const auto& [condition, body] : branches) {
    if (!condition || condition->eval(scope).truthy()) return render_body(body, scope, out);
  }
  return Flow::normal;
}

void For::bind(Scope& scope, const Value& element) const {
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

Flow For::render(Scope& scope, Output& out) const {
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

Flow Set::render(Scope& scope, Output&) const {
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

Flow LoopControl::render(Scope&, Output&) const { return flow; }

Flow Generation::render(Scope& scope, Output& out) const {
  const std::size_t start = out.text.size();
  const Flow flow = render_body(body, scope, out);
  if (out.generation != nullptr) out.generation->emplace_back(start, out.text.size());
  return flow;
}

Flow FilterBlock::render(Scope& scope, Output& out) const {
  Output inner;
  render_body(body, scope, inner);
  Arguments a = args.eval(scope);
  out.text += apply_filter(name, Value::string(std::move(inner.text)), a).str();
  return Flow::normal;
}

Flow Macro::render(Scope& scope, Output&) const {
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

}  // namespace ampt::text::jinja

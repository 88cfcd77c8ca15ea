#include "ampt/text/jinja_value.h"

#include "ampt/core/errors.h"
#include "ampt/text/utf8.h"

#include <fmt/format.h>

#include <cmath>

namespace ampt::text::jinja {
namespace {

// Python's repr(float): the shortest text that reads back, with ".0" on a whole number.
std::string float_text(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  std::string text = fmt::format("{}", f);
  if (text.find_first_of(".en") == std::string::npos) text += ".0";
  return text;
}

// Python's repr(str): single quotes unless the text holds one and no double quote.
std::string string_repr(const std::string& s) {
  const char quote = s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, quote);
  for (const char c : s) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c == quote) {
          out += '\\';
          out += c;
        } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
  }
  return out + quote;
}

void quoted_json(const std::string& s, std::string& out) {
  out += '"';
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

void json_value(const Value& v, int indent, int depth, std::string& out) {
  const auto newline = [&](int level) {
    out += '\n';
    out.append(static_cast<std::size_t>(indent * level), ' ');
  };
  switch (v.kind()) {
    case Value::Kind::none: out += "null"; return;
    case Value::Kind::boolean: out += v.as_bool() ? "true" : "false"; return;
    case Value::Kind::integer: out += std::to_string(v.as_int()); return;
    case Value::Kind::floating: {
      const double f = v.as_double();
      out += std::isnan(f) ? "NaN" : std::isinf(f) ? (f > 0 ? "Infinity" : "-Infinity") : float_text(f);
      return;
    }
    case Value::Kind::string: quoted_json(v.as_string(), out); return;
    case Value::Kind::list: {
      const auto& items = v.as_list();
      if (items.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (std::size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += indent >= 0 ? "," : ", ";
        if (indent >= 0) newline(depth + 1);
        json_value(items[i], indent, depth + 1, out);
      }
      if (indent >= 0) newline(depth);
      out += ']';
      return;
    }
    case Value::Kind::dict:
    case Value::Kind::names: {
      const auto& items = v.as_dict().items;
      if (items.empty()) {
        out += "{}";
        return;
      }
      out += '{';
      for (std::size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += indent >= 0 ? "," : ", ";
        if (indent >= 0) newline(depth + 1);
        const Value& key = items[i].first;
        // json.dumps writes an int, float, bool or None key as its JSON text in quotes.
        quoted_json(key.is_string() ? key.as_string() : to_json(key), out);
        out += ": ";
        json_value(items[i].second, indent, depth + 1, out);
      }
      if (indent >= 0) newline(depth);
      out += '}';
      return;
    }
    case Value::Kind::undefined:
    case Value::Kind::function:
      throw RuntimeError(fmt::format("tojson: {} is not JSON serializable", v.type_name()));
  }
}

int compare_lists(const ValueList& a, const ValueList& b) {
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (less(a[i], b[i])) return -1;
    if (less(b[i], a[i])) return 1;
  }
  return a.size() < b.size() ? -1 : a.size() > b.size() ? 1 : 0;
}

}  // namespace

const Value* ValueDict::find(const Value& key) const {
  for (const auto& [k, v] : items) {
    if (equal(k, key)) return &v;
  }
  return nullptr;
}

const Value* ValueDict::find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k.is_string() && k.as_string() == key) return &v;
  }
  return nullptr;
}

void ValueDict::set(Value key, Value value) {
  for (auto& [k, v] : items) {
    if (equal(k, key)) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(value));
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::none;
  return v;
}

Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::boolean;
  v.b_ = b;
  return v;
}

Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::integer;
  v.i_ = i;
  return v;
}

Value Value::floating(double f) {
  Value v;
  v.kind_ = Kind::floating;
  v.f_ = f;
  return v;
}

Value Value::string(std::string s) {
  Value v;
  v.kind_ = Kind::string;
  v.s_ = std::make_shared<const std::string>(std::move(s));
  return v;
}

Value Value::list(ValueList items) {
  Value v;
  v.kind_ = Kind::list;
  v.list_ = std::make_shared<const ValueList>(std::move(items));
  return v;
}

Value Value::tuple(ValueList items) {
  Value v = list(std::move(items));
  v.tuple_ = true;
  return v;
}

Value Value::dict(ValueDict items) {
  Value v;
  v.kind_ = Kind::dict;
  v.dict_ = std::make_shared<ValueDict>(std::move(items));
  return v;
}

Value Value::names(ValueDict items) {
  Value v = dict(std::move(items));
  v.kind_ = Kind::names;
  return v;
}

Value Value::function(std::string name, Function f) {
  Value v;
  v.kind_ = Kind::function;
  v.s_ = std::make_shared<const std::string>(std::move(name));
  v.fn_ = std::make_shared<const Function>(std::move(f));
  return v;
}

Value Value::from_json(const JsonValue& json) {
  switch (json.kind) {
    case JsonValue::Kind::null: return none();
    case JsonValue::Kind::boolean: return boolean(json.boolean);
    case JsonValue::Kind::number:
      return json.integral && std::abs(json.number) < 9.007199254740992e15
                 ? integer(static_cast<int64_t>(json.number))
                 : floating(json.number);
    case JsonValue::Kind::string: return string(json.string);
    case JsonValue::Kind::array: {
      ValueList items;
      items.reserve(json.items.size());
      for (const auto& item : json.items) items.push_back(from_json(item));
      return list(std::move(items));
    }
    case JsonValue::Kind::object: {
      ValueDict items;
      items.items.reserve(json.members.size());
      for (const auto& [key, member] : json.members) items.items.emplace_back(string(key), from_json(member));
      return dict(std::move(items));
    }
  }
  return {};
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::undefined:
    case Kind::none: return false;
    case Kind::boolean: return b_;
    case Kind::integer: return i_ != 0;
    case Kind::floating: return f_ != 0;
    case Kind::string: return !s_->empty();
    case Kind::list: return !list_->empty();
    case Kind::dict: return !dict_->items.empty();
    case Kind::names:
    case Kind::function: return true;
  }
  return false;
}

std::string Value::str() const {
  switch (kind_) {
    case Kind::undefined: return "";
    case Kind::string: return *s_;
    default: return repr();
  }
}

std::string Value::repr() const {
  switch (kind_) {
    case Kind::undefined: return "Undefined";
    case Kind::none: return "None";
    case Kind::boolean: return b_ ? "True" : "False";
    case Kind::integer: return std::to_string(i_);
    case Kind::floating: return float_text(f_);
    case Kind::string: return string_repr(*s_);
    case Kind::list: {
      std::string out = tuple_ ? "(" : "[";
      for (std::size_t i = 0; i < list_->size(); ++i) out += (i > 0 ? ", " : "") + (*list_)[i].repr();
      if (tuple_) return out + (list_->size() == 1 ? ",)" : ")");
      return out + "]";
    }
    case Kind::dict: {
      std::string out = "{";
      for (std::size_t i = 0; i < dict_->items.size(); ++i) {
        out += (i > 0 ? ", " : "") + dict_->items[i].first.repr() + ": " + dict_->items[i].second.repr();
      }
      return out + "}";
    }
    case Kind::names: return "<Namespace>";
    case Kind::function: return fmt::format("<function {}>", *s_);
  }
  return "";
}

std::string_view Value::type_name() const {
  switch (kind_) {
    case Kind::undefined: return "undefined";
    case Kind::none: return "None";
    case Kind::boolean: return "a bool";
    case Kind::integer: return "an int";
    case Kind::floating: return "a float";
    case Kind::string: return "a string";
    case Kind::list: return "a list";
    case Kind::dict: return "a dict";
    case Kind::names: return "a namespace";
    case Kind::function: return "a function";
  }
  return "?";
}

bool equal(const Value& a, const Value& b) {
  using Kind = Value::Kind;
  if (a.is_number() && b.is_number()) {
    return a.kind() == Kind::integer && b.kind() == Kind::integer ? a.as_int() == b.as_int()
                                                                  : a.as_double() == b.as_double();
  }
  // Python's True == 1.
  if (a.kind() == Kind::boolean && b.is_number()) return equal(Value::integer(a.as_bool() ? 1 : 0), b);
  if (b.kind() == Kind::boolean && a.is_number()) return equal(a, Value::integer(b.as_bool() ? 1 : 0));
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::undefined:
    case Kind::none: return true;
    case Kind::boolean: return a.as_bool() == b.as_bool();
    case Kind::string: return a.as_string() == b.as_string();
    case Kind::list: {
      const auto& x = a.as_list();
      const auto& y = b.as_list();
      if (x.size() != y.size()) return false;
      for (std::size_t i = 0; i < x.size(); ++i) {
        if (!equal(x[i], y[i])) return false;
      }
      return true;
    }
    case Kind::dict: {
      const auto& x = a.as_dict().items;
      if (x.size() != b.as_dict().items.size()) return false;
      for (const auto& [key, value] : x) {
        const Value* other = b.as_dict().find(key);
        if (other == nullptr || !equal(value, *other)) return false;
      }
      return true;
    }
    default: return &a.as_dict() == &b.as_dict();
  }
}

bool less(const Value& a, const Value& b) {
  if ((a.is_number() || a.kind() == Value::Kind::boolean) && (b.is_number() || b.kind() == Value::Kind::boolean)) {
    const auto number = [](const Value& v) {
      return v.kind() == Value::Kind::boolean ? (v.as_bool() ? 1.0 : 0.0) : v.as_double();
    };
    if (a.kind() == Value::Kind::integer && b.kind() == Value::Kind::integer) return a.as_int() < b.as_int();
    return number(a) < number(b);
  }
  // UTF-8 byte order is code point order.
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();
  if (a.is_list() && b.is_list()) return compare_lists(a.as_list(), b.as_list()) < 0;
  throw RuntimeError(fmt::format("'<' is not supported between {} and {}", a.type_name(), b.type_name()));
}

std::vector<std::size_t> code_point_offsets(std::string_view text) {
  std::vector<std::size_t> offsets;
  offsets.reserve(text.size() + 1);
  for (std::size_t pos = 0; pos < text.size();) {
    offsets.push_back(pos);
    pos += decode_utf8(text, pos).length;
  }
  offsets.push_back(text.size());
  return offsets;
}

std::string to_json(const Value& value, int indent) {
  std::string out;
  json_value(value, indent, 0, out);
  return out;
}

}  // namespace ampt::text::jinja

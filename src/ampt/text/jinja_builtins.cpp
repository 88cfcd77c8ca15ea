#include "ampt/text/jinja_builtins.h"

#include "ampt/core/errors.h"
#include "ampt/text/utf8.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <unordered_map>

namespace ampt::text::jinja {
namespace {

using Kind = Value::Kind;

// Python's str.isspace() code points: what strip() and split() without arguments remove.
bool is_python_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 ||
         c == 0x202f || c == 0x205f || c == 0x3000;
}

std::vector<char32_t> code_points(std::string_view text) {
  std::vector<char32_t> out;
  for (std::size_t pos = 0; pos < text.size();) {
    const auto c = decode_utf8(text, pos);
    out.push_back(c.code_point);
    pos += c.length;
  }
  return out;
}

const std::string& need_string(const Value& v, std::string_view what) {
  if (!v.is_string()) throw RuntimeError(fmt::format("{} takes a string, not {}", what, v.type_name()));
  return v.as_string();
}

int64_t need_int(const Value& v, std::string_view what) {
  if (v.kind() == Kind::integer) return v.as_int();
  if (v.kind() == Kind::boolean) return v.as_bool() ? 1 : 0;
  throw RuntimeError(fmt::format("{} takes an int, not {}", what, v.type_name()));
}

// str.strip/lstrip/rstrip: `chars` (a string) or whitespace.
std::string strip(const std::string& text, const Value& chars, bool left, bool right) {
  const auto set = chars.is_string() ? code_points(chars.as_string()) : std::vector<char32_t>{};
  const auto strips = [&](char32_t c) {
    return chars.is_string() ? std::ranges::find(set, c) != set.end() : is_python_space(c);
  };
  const auto offsets = code_point_offsets(text);
  std::size_t first = 0;
  std::size_t last = offsets.size() - 1;  // code points
  if (left) {
    while (first < last && strips(decode_utf8(text, offsets[first]).code_point)) ++first;
  }
  if (right) {
    while (last > first && strips(decode_utf8(text, offsets[last - 1]).code_point)) --last;
  }
  return text.substr(offsets[first], offsets[last] - offsets[first]);
}

std::string replace_all(const std::string& text, const std::string& from, const std::string& to,
                        int64_t count) {
  if (from.empty()) {
    // Python puts `to` between every character (and at both ends).
    const auto offsets = code_point_offsets(text);
    std::string out;
    for (std::size_t i = 0; i + 1 < offsets.size() && (count < 0 || static_cast<int64_t>(i) < count); ++i) {
      out += to;
      out += text.substr(offsets[i], offsets[i + 1] - offsets[i]);
    }
    if (count < 0 || static_cast<int64_t>(offsets.size()) <= count) out += to;
    return out;
  }
  std::string out;
  std::size_t pos = 0;
  for (int64_t n = 0; count < 0 || n < count; ++n) {
    const std::size_t found = text.find(from, pos);
    if (found == std::string::npos) break;
    out.append(text, pos, found - pos);
    out += to;
    pos = found + from.size();
  }
  out.append(text, pos);
  return out;
}

Value split(const std::string& text, const Value& separator, int64_t max_split) {
  ValueList parts;
  if (!separator.is_string()) {
    const auto offsets = code_point_offsets(text);
    std::size_t i = 0;
    const std::size_t n = offsets.size() - 1;
    const auto space = [&](std::size_t k) { return is_python_space(decode_utf8(text, offsets[k]).code_point); };
    while (true) {
      while (i < n && space(i)) ++i;
      if (i == n) break;
      if (max_split >= 0 && static_cast<int64_t>(parts.size()) == max_split) {
        // The rest, trailing whitespace stripped, is the last part.
        std::size_t end = n;
        while (end > i && space(end - 1)) --end;
        parts.push_back(Value::string(text.substr(offsets[i], offsets[end] - offsets[i])));
        break;
      }
      std::size_t j = i;
      while (j < n && !space(j)) ++j;
      parts.push_back(Value::string(text.substr(offsets[i], offsets[j] - offsets[i])));
      i = j;
    }
    return Value::list(std::move(parts));
  }
  const std::string& sep = separator.as_string();
  if (sep.empty()) throw RuntimeError("split: empty separator");
  std::size_t pos = 0;
  while (max_split < 0 || static_cast<int64_t>(parts.size()) < max_split) {
    const std::size_t found = text.find(sep, pos);
    if (found == std::string::npos) break;
    parts.push_back(Value::string(text.substr(pos, found - pos)));
    pos = found + sep.size();
  }
  parts.push_back(Value::string(text.substr(pos)));
  return Value::list(std::move(parts));
}

// ASCII case mappings: what templates apply them to (role names, "true") is ASCII.
std::string ascii_case(std::string text, bool upper) {
  for (char& c : text) {
    if (upper && c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    if (!upper && c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return text;
}

bool ascii_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

std::string title(std::string text) {
  bool start = true;
  for (char& c : text) {
    if (ascii_letter(c)) {
      c = ascii_case(std::string(1, c), start)[0];
      start = false;
    } else {
      start = true;
    }
  }
  return text;
}

std::string capitalize(const std::string& text) {
  std::string out = ascii_case(text, false);
  if (!out.empty()) out[0] = ascii_case(out.substr(0, 1), true)[0];
  return out;
}

int64_t length(const Value& v) {
  switch (v.kind()) {
    case Kind::undefined: return 0;
    case Kind::string: return static_cast<int64_t>(code_point_offsets(v.as_string()).size() - 1);
    case Kind::list: return static_cast<int64_t>(v.as_list().size());
    case Kind::dict:
    case Kind::names: return static_cast<int64_t>(v.as_dict().items.size());
    default: throw RuntimeError(fmt::format("length: {} has no length", v.type_name()));
  }
}

Value dict_items(const Value& v) {
  if (!v.is_mapping()) throw RuntimeError(fmt::format("items: {} is not a dict", v.type_name()));
  ValueList pairs;
  for (const auto& [key, value] : v.as_dict().items) pairs.push_back(Value::tuple({key, value}));
  return Value::list(std::move(pairs));
}

// A dotted attribute path ("function.name"), as jinja2's attribute arguments take one.
Value attribute_path(const Value& object, const std::string& path) {
  Value v = object;
  std::size_t pos = 0;
  while (true) {
    const std::size_t dot = path.find('.', pos);
    const std::string part = path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    int64_t index = 0;
    const auto [end, error] = std::from_chars(part.data(), part.data() + part.size(), index);
    v = error == std::errc() && end == part.data() + part.size() ? item(v, Value::integer(index))
                                                                 : item(v, Value::string(part));
    if (dot == std::string::npos) return v;
    pos = dot + 1;
  }
}

// The arguments after the first `skip` positional ones, for a test or filter named by a string.
Arguments rest(const Arguments& args, std::size_t skip) {
  Arguments out;
  for (std::size_t i = skip; i < args.positional.size(); ++i) out.positional.push_back(args.positional[i]);
  out.named = args.named;
  return out;
}

// select/reject (attr false) and selectattr/rejectattr (attr true).
Value select(const Value& input, Arguments& args, bool attr, bool keep) {
  ValueList out;
  const std::size_t first = attr ? 1 : 0;
  const Value attr_name = attr ? argument(args, 0, "attribute") : Value();
  if (attr && !attr_name.is_string()) throw RuntimeError("selectattr/rejectattr: the attribute is a string");
  const Value test = argument(args, first, "");
  if (!test.is_undefined() && !test.is_string()) throw RuntimeError("select: the test is named by a string");
  if (test.is_string() && !has_test(test.as_string())) {
    throw RuntimeError(fmt::format("no test named '{}'", test.as_string()));
  }
  Arguments test_args = rest(args, first + 1);
  for (const Value& element : iterate(input)) {
    const Value value = attr ? attribute_path(element, attr_name.as_string()) : element;
    const bool passes = test.is_string() ? apply_test(test.as_string(), value, test_args) : value.truthy();
    if (passes == keep) out.push_back(element);
  }
  return Value::list(std::move(out));
}

Value map(const Value& input, Arguments& args) {
  ValueList out;
  const Value attr = argument(args, 99, "attribute");
  if (attr.is_string()) {
    const Value fallback = argument(args, 99, "default");
    for (const Value& element : iterate(input)) {
      Value v = attribute_path(element, attr.as_string());
      out.push_back(v.is_undefined() && !fallback.is_undefined() ? fallback : v);
    }
    return Value::list(std::move(out));
  }
  const Value filter = argument(args, 0, "");
  if (!filter.is_string() || !has_filter(filter.as_string())) {
    throw RuntimeError("map: expected attribute=NAME or the name of a filter");
  }
  Arguments filter_args = rest(args, 1);
  for (const Value& element : iterate(input)) out.push_back(apply_filter(filter.as_string(), element, filter_args));
  return Value::list(std::move(out));
}

Value join(const Value& input, Arguments& args) {
  const Value separator = argument(args, 0, "d", Value::string(""));
  const Value attr = argument(args, 1, "attribute");
  std::string out;
  bool first = true;
  for (const Value& element : iterate(input)) {
    if (!first) out += separator.str();
    first = false;
    out += (attr.is_string() ? attribute_path(element, attr.as_string()) : element).str();
  }
  return Value::string(std::move(out));
}

Value first_or_last(const Value& input, bool first) {
  const ValueList items = iterate(input);
  if (items.empty()) return {};
  return first ? items.front() : items.back();
}

using FilterFn = Value (*)(const Value&, Arguments&);
using TestFn = bool (*)(const Value&, Arguments&);

const std::unordered_map<std::string_view, FilterFn>& filters() {
  static const std::unordered_map<std::string_view, FilterFn> table = {
      {"trim", [](const Value& v, Arguments& a) {
         return Value::string(strip(v.str(), argument(a, 0, "chars"), true, true));
       }},
      {"tojson", [](const Value& v, Arguments& a) {
         const Value indent = argument(a, 0, "indent", Value::none());
         return Value::string(to_json(v, indent.is_none() ? -1 : static_cast<int>(need_int(indent, "tojson indent"))));
       }},
      {"length", [](const Value& v, Arguments&) { return Value::integer(length(v)); }},
      {"count", [](const Value& v, Arguments&) { return Value::integer(length(v)); }},
      {"lower", [](const Value& v, Arguments&) { return Value::string(ascii_case(v.str(), false)); }},
      {"upper", [](const Value& v, Arguments&) { return Value::string(ascii_case(v.str(), true)); }},
      {"title", [](const Value& v, Arguments&) { return Value::string(title(v.str())); }},
      {"capitalize", [](const Value& v, Arguments&) { return Value::string(capitalize(v.str())); }},
      {"join", join},
      {"default", [](const Value& v, Arguments& a) {
         const bool boolean = argument(a, 1, "boolean", Value::boolean(false)).truthy();
         return v.is_undefined() || (boolean && !v.truthy()) ? argument(a, 0, "default_value", Value::string("")) : v;
       }},
      {"items", [](const Value& v, Arguments&) { return v.is_undefined() ? Value::list({}) : dict_items(v); }},
      {"first", [](const Value& v, Arguments&) { return first_or_last(v, true); }},
      {"last", [](const Value& v, Arguments&) { return first_or_last(v, false); }},
      {"replace", [](const Value& v, Arguments& a) {
         const Value count = argument(a, 2, "count", Value::none());
         return Value::string(replace_all(v.str(), argument(a, 0, "old").str(), argument(a, 1, "new").str(),
                                          count.is_none() ? -1 : need_int(count, "replace count")));
       }},
      {"map", map},
      {"select", [](const Value& v, Arguments& a) { return select(v, a, false, true); }},
      {"reject", [](const Value& v, Arguments& a) { return select(v, a, false, false); }},
      {"selectattr", [](const Value& v, Arguments& a) { return select(v, a, true, true); }},
      {"rejectattr", [](const Value& v, Arguments& a) { return select(v, a, true, false); }},
      {"list", [](const Value& v, Arguments&) { return Value::list(iterate(v)); }},
      {"string", [](const Value& v, Arguments&) { return Value::string(v.str()); }},
      {"safe", [](const Value& v, Arguments&) { return v; }},
      {"int", [](const Value& v, Arguments&) {
         if (v.kind() == Kind::floating) return Value::integer(static_cast<int64_t>(v.as_double()));
         if (v.is_number()) return v;
         int64_t i = 0;
         const std::string text = v.str();
         const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), i);
         return Value::integer(error == std::errc() && end == text.data() + text.size() ? i : 0);
       }},
      {"float", [](const Value& v, Arguments&) {
         if (v.is_number()) return Value::floating(v.as_double());
         double f = 0;
         const std::string text = v.str();
         const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), f);
         return Value::floating(error == std::errc() && end == text.data() + text.size() ? f : 0.0);
       }},
      {"abs", [](const Value& v, Arguments&) {
         if (v.kind() == Kind::integer) return Value::integer(v.as_int() < 0 ? -v.as_int() : v.as_int());
         if (v.kind() == Kind::floating) return Value::floating(std::fabs(v.as_double()));
         throw RuntimeError(fmt::format("abs: {} is not a number", v.type_name()));
       }},
      {"reverse", [](const Value& v, Arguments&) {
         if (v.is_string()) {
           const auto offsets = code_point_offsets(v.as_string());
           std::string out;
           for (std::size_t i = offsets.size() - 1; i > 0; --i) {
             out += v.as_string().substr(offsets[i - 1], offsets[i] - offsets[i - 1]);
           }
           return Value::string(std::move(out));
         }
         ValueList items = iterate(v);
         std::ranges::reverse(items);
         return Value::list(std::move(items));
       }},
      {"unique", [](const Value& v, Arguments&) {
         ValueList out;
         for (const Value& element : iterate(v)) {
           if (std::ranges::none_of(out, [&](const Value& seen) { return equal(seen, element); })) {
             out.push_back(element);
           }
         }
         return Value::list(std::move(out));
       }},
  };
  return table;
}

bool compare_test(const Value& v, Arguments& a, int op) {
  const Value other = argument(a, 0, "value");
  switch (op) {
    case 0: return equal(v, other);
    case 1: return !equal(v, other);
    case 2: return less(v, other);
    case 3: return !less(other, v);
    case 4: return less(other, v);
    default: return !less(v, other);
  }
}

const std::unordered_map<std::string_view, TestFn>& tests() {
  static const std::unordered_map<std::string_view, TestFn> table = {
      {"defined", [](const Value& v, Arguments&) { return !v.is_undefined(); }},
      {"undefined", [](const Value& v, Arguments&) { return v.is_undefined(); }},
      {"none", [](const Value& v, Arguments&) { return v.is_none(); }},
      {"string", [](const Value& v, Arguments&) { return v.is_string(); }},
      {"mapping", [](const Value& v, Arguments&) { return v.kind() == Kind::dict; }},
      {"sequence", [](const Value& v, Arguments&) { return v.is_string() || v.is_list() || v.kind() == Kind::dict; }},
      {"iterable", [](const Value& v, Arguments&) { return v.is_string() || v.is_list() || v.kind() == Kind::dict; }},
      {"number", [](const Value& v, Arguments&) { return v.is_number() || v.kind() == Kind::boolean; }},
      {"integer", [](const Value& v, Arguments&) { return v.kind() == Kind::integer; }},
      {"float", [](const Value& v, Arguments&) { return v.kind() == Kind::floating; }},
      {"boolean", [](const Value& v, Arguments&) { return v.kind() == Kind::boolean; }},
      {"true", [](const Value& v, Arguments&) { return v.kind() == Kind::boolean && v.as_bool(); }},
      {"false", [](const Value& v, Arguments&) { return v.kind() == Kind::boolean && !v.as_bool(); }},
      {"callable", [](const Value& v, Arguments&) { return v.kind() == Kind::function; }},
      {"odd", [](const Value& v, Arguments&) { return need_int(v, "odd") % 2 != 0; }},
      {"even", [](const Value& v, Arguments&) { return need_int(v, "even") % 2 == 0; }},
      {"divisibleby", [](const Value& v, Arguments& a) {
         const int64_t n = need_int(argument(a, 0, "num"), "divisibleby");
         return n != 0 && need_int(v, "divisibleby") % n == 0;
       }},
      {"lower", [](const Value& v, Arguments&) { return v.is_string() && ascii_case(v.as_string(), false) == v.as_string(); }},
      {"upper", [](const Value& v, Arguments&) { return v.is_string() && ascii_case(v.as_string(), true) == v.as_string(); }},
      {"in", [](const Value& v, Arguments& a) { return contains(argument(a, 0, "seq"), v); }},
      {"sameas", [](const Value& v, Arguments& a) {
         const Value other = argument(a, 0, "other");
         return v.kind() == other.kind() && (v.is_none() || v.is_undefined() || equal(v, other));
       }},
      {"equalto", [](const Value& v, Arguments& a) { return compare_test(v, a, 0); }},
      {"eq", [](const Value& v, Arguments& a) { return compare_test(v, a, 0); }},
      {"==", [](const Value& v, Arguments& a) { return compare_test(v, a, 0); }},
      {"ne", [](const Value& v, Arguments& a) { return compare_test(v, a, 1); }},
      {"!=", [](const Value& v, Arguments& a) { return compare_test(v, a, 1); }},
      {"lt", [](const Value& v, Arguments& a) { return compare_test(v, a, 2); }},
      {"<", [](const Value& v, Arguments& a) { return compare_test(v, a, 2); }},
      {"le", [](const Value& v, Arguments& a) { return compare_test(v, a, 3); }},
      {"<=", [](const Value& v, Arguments& a) { return compare_test(v, a, 3); }},
      {"gt", [](const Value& v, Arguments& a) { return compare_test(v, a, 4); }},
      {">", [](const Value& v, Arguments& a) { return compare_test(v, a, 4); }},
      {"ge", [](const Value& v, Arguments& a) { return compare_test(v, a, 5); }},
      {">=", [](const Value& v, Arguments& a) { return compare_test(v, a, 5); }},
  };
  return table;
}

Value bound(const Value& object, std::string_view name, Value (*method)(const Value&, Arguments&)) {
  return Value::function(std::string(name), [object, method](Arguments& args) { return method(object, args); });
}

bool affix(const Value& self, Arguments& a, bool starts) {
  const std::string& text = self.as_string();
  const Value arg = argument(a, 0, "");
  const auto one = [&](const std::string& p) {
    return starts ? std::string_view(text).starts_with(p) : std::string_view(text).ends_with(p);
  };
  if (arg.is_list()) {
    return std::ranges::any_of(arg.as_list(), [&](const Value& p) { return one(need_string(p, "startswith")); });
  }
  return one(need_string(arg, starts ? "startswith" : "endswith"));
}

using Method = Value (*)(const Value&, Arguments&);

const std::unordered_map<std::string_view, Method>& string_methods() {
  static const std::unordered_map<std::string_view, Method> table = {
      {"startswith", [](const Value& s, Arguments& a) { return Value::boolean(affix(s, a, true)); }},
      {"endswith", [](const Value& s, Arguments& a) { return Value::boolean(affix(s, a, false)); }},
      {"split", [](const Value& s, Arguments& a) {
         const Value max = argument(a, 1, "maxsplit", Value::integer(-1));
         return split(s.as_string(), argument(a, 0, "sep", Value::none()), need_int(max, "split maxsplit"));
       }},
      {"strip", [](const Value& s, Arguments& a) { return Value::string(strip(s.as_string(), argument(a, 0, "chars"), true, true)); }},
      {"lstrip", [](const Value& s, Arguments& a) { return Value::string(strip(s.as_string(), argument(a, 0, "chars"), true, false)); }},
      {"rstrip", [](const Value& s, Arguments& a) { return Value::string(strip(s.as_string(), argument(a, 0, "chars"), false, true)); }},
      {"replace", [](const Value& s, Arguments& a) {
         const Value count = argument(a, 2, "count", Value::integer(-1));
         return Value::string(replace_all(s.as_string(), need_string(argument(a, 0, "old"), "replace"),
                                          need_string(argument(a, 1, "new"), "replace"), need_int(count, "replace count")));
       }},
      {"upper", [](const Value& s, Arguments&) { return Value::string(ascii_case(s.as_string(), true)); }},
      {"lower", [](const Value& s, Arguments&) { return Value::string(ascii_case(s.as_string(), false)); }},
      {"title", [](const Value& s, Arguments&) { return Value::string(title(s.as_string())); }},
      {"capitalize", [](const Value& s, Arguments&) { return Value::string(capitalize(s.as_string())); }},
      {"find", [](const Value& s, Arguments& a) {
         const std::size_t at = s.as_string().find(need_string(argument(a, 0, "sub"), "find"));
         if (at == std::string::npos) return Value::integer(-1);
         return Value::integer(static_cast<int64_t>(code_point_offsets(s.as_string().substr(0, at)).size() - 1));
       }},
      {"join", [](const Value& s, Arguments& a) {
         std::string out;
         bool first = true;
         for (const Value& v : iterate(argument(a, 0, "iterable"))) {
           if (!first) out += s.as_string();
           first = false;
           out += need_string(v, "join");
         }
         return Value::string(std::move(out));
       }},
  };
  return table;
}

const std::unordered_map<std::string_view, Method>& dict_methods() {
  static const std::unordered_map<std::string_view, Method> table = {
      {"items", [](const Value& d, Arguments&) { return dict_items(d); }},
      {"keys", [](const Value& d, Arguments&) {
         ValueList keys;
         for (const auto& [k, v] : d.as_dict().items) keys.push_back(k);
         return Value::list(std::move(keys));
       }},
      {"values", [](const Value& d, Arguments&) {
         ValueList values;
         for (const auto& [k, v] : d.as_dict().items) values.push_back(v);
         return Value::list(std::move(values));
       }},
      {"get", [](const Value& d, Arguments& a) {
         const Value* found = d.as_dict().find(argument(a, 0, "key"));
         return found != nullptr ? *found : argument(a, 1, "default", Value::none());
       }},
  };
  return table;
}

// Python's index into a sequence of `size`: negative from the end; -1 when out of range.
int64_t python_index(int64_t index, std::size_t size) {
  const auto n = static_cast<int64_t>(size);
  if (index < 0) index += n;
  return index < 0 || index >= n ? -1 : index;
}

}  // namespace

bool contains(const Value& container, const Value& element) {
  if (container.is_string()) return container.as_string().find(need_string(element, "'in' on a string")) != std::string::npos;
  if (container.is_mapping()) return container.as_dict().find(element) != nullptr;
  if (container.is_list()) {
    return std::ranges::any_of(container.as_list(), [&](const Value& v) { return equal(v, element); });
  }
  throw RuntimeError(fmt::format("'in' needs a string, list or dict on its right, not {}", container.type_name()));
}

bool has_filter(std::string_view name) {
  return filters().contains(name) || name == "d" || name == "e" || name == "escape";
}

bool has_test(std::string_view name) { return tests().contains(name); }

Value apply_filter(std::string_view name, const Value& input, Arguments& args) {
  if (name == "d") name = "default";
  if (name == "e" || name == "escape") {
    std::string out;
    for (const char c : input.str()) {
      switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&#34;"; break;
        case '\'': out += "&#39;"; break;
        default: out += c;
      }
    }
    return Value::string(std::move(out));
  }
  const auto found = filters().find(name);
  if (found == filters().end()) throw RuntimeError(fmt::format("no filter named '{}'", name));
  return found->second(input, args);
}

bool apply_test(std::string_view name, const Value& input, Arguments& args) {
  const auto found = tests().find(name);
  if (found == tests().end()) throw RuntimeError(fmt::format("no test named '{}'", name));
  return found->second(input, args);
}

Value attribute(const Value& object, std::string_view name) {
  if (object.is_undefined()) {
    throw RuntimeError(fmt::format("undefined has no attribute '{}'", name));
  }
  if (object.is_string()) {
    if (const auto m = string_methods().find(name); m != string_methods().end()) return bound(object, name, m->second);
    return {};
  }
  if (object.kind() == Kind::dict) {
    if (const auto m = dict_methods().find(name); m != dict_methods().end()) return bound(object, name, m->second);
  }
  if (object.is_mapping()) {
    const Value* found = object.as_dict().find(name);
    return found != nullptr ? *found : Value();
  }
  return {};
}

Value item(const Value& object, const Value& key) {
  if (object.is_undefined()) throw RuntimeError(fmt::format("undefined has no item {}", key.repr()));
  if (object.is_mapping()) {
    const Value* found = object.as_dict().find(key);
    if (found != nullptr) return *found;
    return key.is_string() && object.kind() == Kind::dict ? attribute(object, key.as_string()) : Value();
  }
  if (key.kind() == Kind::integer || key.kind() == Kind::boolean) {
    const int64_t index = need_int(key, "an index");
    if (object.is_list()) {
      const int64_t at = python_index(index, object.as_list().size());
      return at < 0 ? Value() : object.as_list()[static_cast<std::size_t>(at)];
    }
    if (object.is_string()) {
      const auto offsets = code_point_offsets(object.as_string());
      const int64_t at = python_index(index, offsets.size() - 1);
      if (at < 0) return {};
      const auto i = static_cast<std::size_t>(at);
      return Value::string(object.as_string().substr(offsets[i], offsets[i + 1] - offsets[i]));
    }
  }
  if (key.is_string()) return attribute(object, key.as_string());
  return {};
}

Value slice(const Value& object, std::optional<int64_t> start, std::optional<int64_t> stop,
            std::optional<int64_t> step) {
  const int64_t by = step.value_or(1);
  if (by == 0) throw RuntimeError("slice step cannot be zero");
  std::vector<std::size_t> offsets;
  int64_t n = 0;
  if (object.is_string()) {
    offsets = code_point_offsets(object.as_string());
    n = static_cast<int64_t>(offsets.size()) - 1;
  } else if (object.is_list()) {
    n = static_cast<int64_t>(object.as_list().size());
  } else {
    throw RuntimeError(fmt::format("{} cannot be sliced", object.type_name()));
  }
  // Python's slice.indices().
  const auto clamp = [&](std::optional<int64_t> v, int64_t fallback) {
    if (!v) return fallback;
    int64_t i = *v < 0 ? *v + n : *v;
    if (by > 0) return std::clamp<int64_t>(i, 0, n);
    return std::clamp<int64_t>(i, -1, n - 1);
  };
  const int64_t from = clamp(start, by > 0 ? 0 : n - 1);
  const int64_t to = clamp(stop, by > 0 ? n : -1);
  std::vector<int64_t> picked;
  for (int64_t i = from; by > 0 ? i < to : i > to; i += by) picked.push_back(i);
  if (object.is_string()) {
    std::string out;
    for (const int64_t i : picked) {
      const auto k = static_cast<std::size_t>(i);
      out += object.as_string().substr(offsets[k], offsets[k + 1] - offsets[k]);
    }
    return Value::string(std::move(out));
  }
  ValueList out;
  for (const int64_t i : picked) out.push_back(object.as_list()[static_cast<std::size_t>(i)]);
  return Value::list(std::move(out));
}

ValueList iterate(const Value& value) {
  switch (value.kind()) {
    case Kind::undefined: return {};
    case Kind::list: return value.as_list();
    case Kind::dict: {
      ValueList keys;
      for (const auto& [k, v] : value.as_dict().items) keys.push_back(k);
      return keys;
    }
    case Kind::string: {
      ValueList chars;
      const auto offsets = code_point_offsets(value.as_string());
      for (std::size_t i = 0; i + 1 < offsets.size(); ++i) {
        chars.push_back(Value::string(value.as_string().substr(offsets[i], offsets[i + 1] - offsets[i])));
      }
      return chars;
    }
    default: throw RuntimeError(fmt::format("{} is not iterable", value.type_name()));
  }
}

Value argument(Arguments& args, std::size_t index, std::string_view name, Value fallback) {
  for (const auto& [key, value] : args.named) {
    if (!name.empty() && key == name) return value;
  }
  return index < args.positional.size() ? args.positional[index] : fallback;
}

}  // namespace ampt::text::jinja

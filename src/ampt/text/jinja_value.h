// The values a Jinja chat template computes with, as Python holds them under jinja2: None, bools,
// ints, floats, str (UTF-8, indexed by code point), lists, dicts (in insertion order), namespace()
// objects, callables (macros, globals, bound methods) and jinja2's Undefined. Lists and dicts are
// shared, as Python's are; a template cannot change them (transformers renders in jinja2's
// immutable sandbox), only a namespace's attributes.
#pragma once

#include "ampt/core/json_reader.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ampt::text::jinja {

class Value;
using ValueList = std::vector<Value>;

// A dict's items in insertion order: chat data holds a handful of keys, so lookup is a scan.
struct ValueDict {
  std::vector<std::pair<Value, Value>> items;
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  void set(Value key, Value value);
};

// What a call passes: positional arguments, then name=value ones.
struct Arguments {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> named;
};

using Function = std::function<Value(Arguments&)>;

class Value {
 public:
  enum class Kind { undefined, none, boolean, integer, floating, string, list, dict, names, function };

  Value() = default;  // Undefined
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value floating(double f);
  static Value string(std::string s);
  static Value list(ValueList items);
  // A list Python holds as a tuple: (a, b) literals and items()' pairs, which print in parentheses.
  static Value tuple(ValueList items);
  static Value dict(ValueDict items);
  // A namespace(): a dict whose entries `set ns.x = ...` may change.
  static Value names(ValueDict items);
  static Value function(std::string name, Function f);
  // JSON as Python's json.loads gives it: a number without '.', 'e' or 'E' is an int.
  static Value from_json(const JsonValue& json);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::undefined; }
  bool is_none() const { return kind_ == Kind::none; }
  bool is_string() const { return kind_ == Kind::string; }
  bool is_number() const { return kind_ == Kind::integer || kind_ == Kind::floating; }
  bool is_list() const { return kind_ == Kind::list; }
  bool is_mapping() const { return kind_ == Kind::dict || kind_ == Kind::names; }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return i_; }
  double as_double() const { return kind_ == Kind::integer ? static_cast<double>(i_) : f_; }
  const std::string& as_string() const { return *s_; }
  const ValueList& as_list() const { return *list_; }
  const ValueDict& as_dict() const { return *dict_; }
  ValueDict& names_dict() const { return *dict_; }  // a namespace's, which `set` changes
  const std::string& function_name() const { return *s_; }
  Value call(Arguments& args) const { return (*fn_)(args); }

  // Python's bool(x); Undefined is false.
  bool truthy() const;
  // What {{ x }} prints: str(x) (None as "None", True as "True", lists as Python's repr).
  std::string str() const;
  // Python's repr(x): strings quoted.
  std::string repr() const;
  // "a string", "an int", "undefined": for errors.
  std::string_view type_name() const;

 private:
  Kind kind_ = Kind::undefined;
  bool tuple_ = false;
  bool b_ = false;
  int64_t i_ = 0;
  double f_ = 0;
  std::shared_ptr<const std::string> s_;
  std::shared_ptr<const ValueList> list_;
  std::shared_ptr<ValueDict> dict_;
  std::shared_ptr<const Function> fn_;
};

// Python's ==: 1 == 1.0, lists and dicts by their items; Undefined equals only Undefined.
bool equal(const Value& a, const Value& b);
// Python's <, for numbers and strings (code point order) and lists of them; throws RuntimeError
// for other pairs, as Python raises TypeError.
bool less(const Value& a, const Value& b);

// The number of code points of a UTF-8 string, and its code point `index` .. as byte offsets.
std::vector<std::size_t> code_point_offsets(std::string_view text);

// transformers' tojson: json.dumps(x, ensure_ascii=False, indent=indent), so ", " and ": "
// between items without an indent, "," and a newline with one; keys in insertion order. Throws
// RuntimeError for Undefined or a function.
std::string to_json(const Value& value, int indent = -1);

}  // namespace ampt::text::jinja

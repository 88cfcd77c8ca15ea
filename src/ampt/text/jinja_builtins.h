// The filters, tests, attributes and methods a chat template reaches, as jinja2 (in transformers'
// sandbox) and Python give them: `x | trim`, `x is string`, `s.split(...)`, `d.items()`,
// `x[1:]`. Each throws RuntimeError (no line: the template adds it) for arguments Python would
// refuse.
#pragma once

#include "ampt/text/jinja_value.h"

#include <optional>
#include <string_view>

namespace ampt::text::jinja {

// Whether a filter or test of this name exists: a template naming another is refused when it is
// read, not when a chat first reaches it.
bool has_filter(std::string_view name);
bool has_test(std::string_view name);

Value apply_filter(std::string_view name, const Value& input, Arguments& args);
bool apply_test(std::string_view name, const Value& input, Arguments& args);

// jinja2's getattr for `object.name`: a str's or dict's method (bound), else the dict's item
// `name`, else Undefined.
Value attribute(const Value& object, std::string_view name);
// jinja2's getitem for `object[key]`: an item (negative list and string indexes count from the
// end), else Undefined.
Value item(const Value& object, const Value& key);
// Python's object[start:stop:step] of a list or a string (by code point).
Value slice(const Value& object, std::optional<int64_t> start, std::optional<int64_t> stop,
            std::optional<int64_t> step);

// Python's `element in container`: a substring, a list item or a dict key. Throws RuntimeError for
// another container.
bool contains(const Value& container, const Value& element);

// Python's iter(x) as a for loop and the filters take it: a list's items, a dict's keys, a
// string's characters; Undefined is empty. Throws RuntimeError for anything else.
ValueList iterate(const Value& value);

// The named argument `name`, else positional `index`, else `fallback`.
Value argument(Arguments& args, std::size_t index, std::string_view name, Value fallback = {});

}  // namespace ampt::text::jinja

// A small JSON reader for tokenizer files (tokenizer.json, vocab.json) and JSON Lines documents:
// the whole value tree, strings decoded to UTF-8.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ampt {

struct JsonValue {
  enum class Kind { null, boolean, number, string, array, object };
  Kind kind = Kind::null;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<JsonValue> items;                              // array
  std::vector<std::pair<std::string, JsonValue>> members;    // object, in file order
  bool integral = false;  // a number written without '.', 'e' or 'E': Python's int

  // The member named `key`, or nullptr (also when this is not an object).
  const JsonValue* find(std::string_view key) const;
  // A short name of the kind, for errors: "a string", "an object" ...
  const char* kind_name() const;
};

// What is wrong and the byte offset where reading stopped; callers add the file name.
class JsonError : public std::runtime_error {
 public:
  JsonError(const std::string& what, std::size_t offset)
      : std::runtime_error(what + " at byte " + std::to_string(offset)) {}
};

// The one JSON value in `text` (whitespace around it allowed); throws JsonError.
JsonValue parse_json(std::string_view text);

}  // namespace ampt

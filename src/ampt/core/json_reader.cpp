#include "ampt/core/json_reader.h"

#include "ampt/core/utf8_append.h"

#include <charconv>
#include <cstdint>

namespace ampt {
namespace {

// Deep enough for any tokenizer file; shallow enough that recursion cannot exhaust the stack.
constexpr int kMaxDepth = 256;

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  JsonValue document() {
    JsonValue value = parse_value(0);
    skip_space();
    if (pos_ != text_.size()) fail("unexpected text after the JSON value");
    return value;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { throw JsonError(what, pos_); }

  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' ||
                                   text_[pos_] == '\r' || text_[pos_] == '\t')) {
      ++pos_;
    }
  }

  char peek() {
    skip_space();
    if (pos_ >= text_.size()) fail("unexpected end of the file (truncated?)");
    return text_[pos_];
  }

  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++pos_;
  }

  void literal(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) fail("invalid literal");
    pos_ += word.size();
  }

  JsonValue parse_value(int depth) {
    if (depth > kMaxDepth) fail("nested deeper than 256 levels");
    JsonValue value;
    switch (peek()) {
      case '{': value.kind = JsonValue::Kind::object; parse_object(value, depth); break;
      case '[': value.kind = JsonValue::Kind::array; parse_array(value, depth); break;
      case '"': value.kind = JsonValue::Kind::string; value.string = parse_string(); break;
      case 't': value.kind = JsonValue::Kind::boolean; value.boolean = true; literal("true"); break;
      case 'f': value.kind = JsonValue::Kind::boolean; literal("false"); break;
      case 'n': literal("null"); break;
      default: value.kind = JsonValue::Kind::number; value.number = parse_number(value.integral); break;
    }
    return value;
  }

  void parse_object(JsonValue& value, int depth) {
    expect('{');
    if (peek() == '}') {
      ++pos_;
      return;
    }
    while (true) {
      if (peek() != '"') fail("expected a quoted member name");
      std::string key = parse_string();
      expect(':');
      value.members.emplace_back(std::move(key), parse_value(depth + 1));
      if (peek() == '}') {
        ++pos_;
        return;
      }
      expect(',');
    }
  }

  void parse_array(JsonValue& value, int depth) {
    expect('[');
    if (peek() == ']') {
      ++pos_;
      return;
    }
    while (true) {
      value.items.push_back(parse_value(depth + 1));
      if (peek() == ']') {
        ++pos_;
        return;
      }
      expect(',');
    }
  }

  double parse_number(bool& integral) {
    const char* begin = text_.data() + pos_;
    double number = 0;
    const auto [end, error] = std::from_chars(begin, text_.data() + text_.size(), number);
    if (error != std::errc() || end == begin) fail("expected a value");
    integral = std::string_view(begin, end).find_first_of(".eE") == std::string_view::npos;
    pos_ += static_cast<std::size_t>(end - begin);
    return number;
  }

  char32_t hex4() {
    if (pos_ + 4 > text_.size()) fail("unexpected end of the file (truncated?)");
    uint32_t value = 0;
    const auto [end, error] = std::from_chars(text_.data() + pos_, text_.data() + pos_ + 4, value, 16);
    if (error != std::errc() || end != text_.data() + pos_ + 4) fail("invalid \\u escape");
    pos_ += 4;
    return value;
  }

  std::string parse_string() {
    ++pos_;  // the opening quote
    std::string out;
    while (true) {
      if (pos_ >= text_.size()) fail("unexpected end of the file in a string (truncated?)");
      const char c = text_[pos_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= text_.size()) fail("unexpected end of the file in a string (truncated?)");
      switch (const char e = text_[pos_++]) {
        case '"': case '\\': case '/': out += e; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': out_code_point(out); break;
        default: fail(std::string("invalid escape \\") + e);
      }
    }
  }

  void out_code_point(std::string& out) {
    char32_t c = hex4();
    if (c >= 0xDC00 && c <= 0xDFFF) fail("lone low surrogate in a \\u escape");
    if (c >= 0xD800 && c <= 0xDBFF) {
      if (text_.substr(pos_, 2) != "\\u") fail("lone high surrogate in a \\u escape");
      pos_ += 2;
      const char32_t low = hex4();
      if (low < 0xDC00 || low > 0xDFFF) fail("high surrogate without a low one in a \\u escape");
      c = 0x10000 + ((c - 0xD800) << 10) + (low - 0xDC00);
    }
    append_utf8(out, c);
  }

  std::string_view text_;
  std::size_t pos_ = 0;
};

}  // namespace

const JsonValue* JsonValue::find(std::string_view key) const {
  for (const auto& [name, value] : members) {
    if (name == key) return &value;
  }
  return nullptr;
}

const char* JsonValue::kind_name() const {
  switch (kind) {
    case Kind::null: return "null";
    case Kind::boolean: return "a boolean";
    case Kind::number: return "a number";
    case Kind::string: return "a string";
    case Kind::array: return "an array";
    case Kind::object: return "an object";
  }
  return "?";
}

JsonValue parse_json(std::string_view text) { return Parser(text).document(); }

}  // namespace ampt

#include "ampt/text/jinja_lexer.h"

#include "ampt/core/utf8_append.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdint>

namespace ampt::text::jinja {
namespace {

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

}  // namespace

std::vector<Token> lex(std::string_view source) { return Lexer(source).run(); }

}  // namespace ampt::text::jinja

#include "ampt/reward/math_answer.h"

#include <cmath>
#include <cstdlib>
#include <numeric>
#include <string_view>

namespace ampt::reward {
namespace {

bool digit_at(std::string_view s, std::size_t i) { return i < s.size() && s[i] >= '0' && s[i] <= '9'; }
bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

std::size_t skip_spaces(std::string_view s, std::size_t i) {
  while (i < s.size() && is_space(s[i])) ++i;
  return i;
}

std::string_view trimmed(std::string_view s) {
  const std::size_t begin = skip_spaces(s, 0);
  std::size_t end = s.size();
  while (end > begin && is_space(s[end - 1])) --end;
  return s.substr(begin, end - begin);
}

std::string replaced(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  for (std::size_t i = 0; i < s.size();) {
    if (s.substr(i).starts_with(from)) {
      out += to;
      i += from.size();
    } else {
      out += s[i++];
    }
  }
  return out;
}

// A number without its sign as written: the integer digits (thousands commas dropped) and the
// digits after the point.
struct Written {
  std::string integer;
  std::string fraction;
  bool point = false;
  std::size_t end = 0;
};

std::optional<Written> read_unsigned(std::string_view s, std::size_t pos) {
  Written w;
  std::size_t i = pos;
  while (digit_at(s, i)) w.integer += s[i++];
  // "1,234,567": groups of exactly three digits after a first group of one to three. "1,2" and
  // "1,2345" are two numbers.
  if (!w.integer.empty() && w.integer.size() <= 3) {
    while (i < s.size() && s[i] == ',' && digit_at(s, i + 1) && digit_at(s, i + 2) && digit_at(s, i + 3) &&
           !digit_at(s, i + 4)) {
      w.integer.append(s.substr(i + 1, 3));
      i += 4;
    }
  }
  if (i < s.size() && s[i] == '.' && digit_at(s, i + 1)) {
    w.point = true;
    ++i;
    while (digit_at(s, i)) w.fraction += s[i++];
  }
  if (w.integer.empty() && !w.point) return std::nullopt;
  w.end = i;
  return w;
}

void set_ratio(MathNumber& n, int64_t numerator, int64_t denominator) {
  const int64_t divisor = std::gcd(numerator, denominator);
  n.numerator = numerator / divisor;
  n.denominator = denominator / divisor;
}

MathNumber number_of(const Written& w, bool negative) {
  MathNumber n;
  n.decimal = w.point;
  const std::string text = (w.integer.empty() ? "0" : w.integer) + (w.point ? "." + w.fraction : "");
  n.value = std::strtold(text.c_str(), nullptr) * (negative ? -1 : 1);
  if (!w.point) {
    const std::size_t first = w.integer.find_first_not_of('0');
    const std::string digits = first == std::string::npos ? "0" : w.integer.substr(first);
    // 18 digits always fit in an int64_t; a longer integer is compared by its digits.
    if (digits.size() <= 18) {
      n.numerator = std::stoll(digits) * (negative ? -1 : 1);
    } else {
      n.big_integer = (negative ? "-" : "") + digits;
    }
  }
  return n;
}

void negate(MathNumber& n) {
  n.value = -n.value;
  if (n.numerator) n.numerator = -*n.numerator;
  if (!n.big_integer.empty()) {
    n.big_integer = n.big_integer[0] == '-' ? n.big_integer.substr(1) : "-" + n.big_integer;
  }
}

// a / b; nullopt for a zero denominator, and for an integer fraction whose parts do not fit in
// 64 bits (no answer or record holds one).
std::optional<MathNumber> divide(const MathNumber& a, const MathNumber& b) {
  if (b.value == 0) return std::nullopt;
  MathNumber q;
  q.decimal = a.decimal || b.decimal;
  q.value = a.value / b.value;
  if (q.decimal) return q;
  if (!a.numerator || !b.numerator) return std::nullopt;
  // The parts are below 10^18, so only a percentage's / 100 can overflow.
  int64_t numerator = 0;
  int64_t denominator = 0;
  if (__builtin_mul_overflow(*a.numerator, b.denominator, &numerator) ||
      __builtin_mul_overflow(a.denominator, *b.numerator, &denominator)) {
    return std::nullopt;
  }
  if (denominator < 0) {
    numerator = -numerator;
    denominator = -denominator;
  }
  set_ratio(q, numerator, denominator);
  return q;
}

struct Read {
  MathNumber number;
  std::size_t end = 0;
};

// One argument of \frac: {number} (a sign allowed inside) or one digit, as in \frac34.
std::optional<Read> read_frac_argument(std::string_view s, std::size_t pos) {
  std::size_t i = skip_spaces(s, pos);
  if (digit_at(s, i)) return Read{number_of(Written{std::string(1, s[i]), "", false, i + 1}, false), i + 1};
  if (i >= s.size() || s[i] != '{') return std::nullopt;
  i = skip_spaces(s, i + 1);
  bool negative = false;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) negative = s[i++] == '-';
  const auto w = read_unsigned(s, i);
  if (!w) return std::nullopt;
  i = skip_spaces(s, w->end);
  if (i >= s.size() || s[i] != '}') return std::nullopt;
  return Read{number_of(*w, negative), i + 1};
}

// A number starting at `pos`: a sign, then \frac{a}{b} (\dfrac, \tfrac), a/b or a plain number.
std::optional<Read> read_signed(std::string_view s, std::size_t pos) {
  std::size_t i = pos;
  bool negative = false;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) negative = s[i++] == '-';
  for (const std::string_view command : {"\\frac", "\\dfrac", "\\tfrac"}) {
    if (!s.substr(i).starts_with(command)) continue;
    const auto top = read_frac_argument(s, i + command.size());
    if (!top) return std::nullopt;
    const auto bottom = read_frac_argument(s, top->end);
    if (!bottom) return std::nullopt;
    auto q = divide(top->number, bottom->number);
    if (!q) return std::nullopt;
    if (negative) negate(*q);
    return Read{*q, bottom->end};
  }
  const auto w = read_unsigned(s, i);
  if (!w) return std::nullopt;
  const MathNumber n = number_of(*w, negative);
  const std::size_t slash = skip_spaces(s, w->end);
  if (slash < s.size() && s[slash] == '/') {
    if (const auto d = read_unsigned(s, skip_spaces(s, slash + 1))) {
      const auto q = divide(n, number_of(*d, false));
      if (!q) return std::nullopt;
      return Read{*q, d->end};
    }
  }
  return Read{n, w->end};
}

// Where a "%" or "\%" right after a number (spaces allowed) ends, or npos.
std::size_t percent_end(std::string_view s, std::size_t pos) {
  const std::size_t i = skip_spaces(s, pos);
  if (s.substr(i).starts_with("%")) return i + 1;
  if (s.substr(i).starts_with("\\%")) return i + 2;
  return std::string_view::npos;
}

// What may follow a number as its unit: a word of two letters or more (apples, km/h; one letter
// is a variable, as in 5x), \text{...}, \mbox{...}, \mathrm{...}, a degree sign; digits only as
// exponents (m^2, \text{cm}^{3}); no operator or relation.
bool is_unit(std::string_view rest) {
  const bool word = rest.size() >= 2 && is_letter(rest[0]) && is_letter(rest[1]);
  bool opens = word || rest.starts_with("\xC2\xB0") || rest.starts_with("^\\circ") || rest.starts_with("^{\\circ}");
  for (const std::string_view command : {"\\text", "\\mbox", "\\mathrm", "\\textbf", "\\rm ", "\\circ", "\\degree"}) {
    opens = opens || rest.starts_with(command);
  }
  if (!opens || rest.find_first_of("=+<>") != std::string_view::npos) return false;
  for (std::size_t i = 0; i < rest.size(); ++i) {
    if (!digit_at(rest, i)) continue;
    const bool exponent = i > 0 && (rest[i - 1] == '^' || (i >= 2 && rest[i - 1] == '{' && rest[i - 2] == '^') ||
                                    digit_at(rest, i - 1));
    if (!exponent) return false;
  }
  return true;
}

// LaTeX's "{,}" thousands comma as a plain one.
std::string plain_commas(std::string_view text) { return replaced(text, "{,}", ","); }

// Whether a number may start at `i`: not inside a word (x2, m2), an exponent or subscript (x^2),
// a decimal (3.5's 5) or a denominator (1/0's 0).
bool may_start_number(std::string_view s, std::size_t i) {
  if (i == 0) return true;
  const char before = s[i - 1];
  return !(digit_at(s, i - 1) || is_letter(before) || before == '.' || before == '^' || before == '_' ||
           before == '/' || before == '\\');
}

std::optional<MathNumber> last_number(std::string_view s) {
  std::optional<MathNumber> last;
  for (std::size_t i = 0; i < s.size();) {
    const char c = s[i];
    const bool opens = digit_at(s, i) || c == '-' || c == '+' || c == '.' || s.substr(i).starts_with("\\frac") ||
                       s.substr(i).starts_with("\\dfrac") || s.substr(i).starts_with("\\tfrac");
    if (opens && may_start_number(s, i)) {
      if (auto r = read_signed(s, i)) {
        last = r->number;
        i = r->end;
        if (const std::size_t end = percent_end(s, i); end != std::string_view::npos) {
          last->percent = true;
          i = end;
        }
        continue;
      }
    }
    ++i;
  }
  return last;
}

// The contents of the \boxed{ that opens at `open` (its '{'), braces balanced; nullopt if they
// never close.
std::optional<std::string_view> braced(std::string_view text, std::size_t open) {
  int depth = 0;
  for (std::size_t i = open; i < text.size(); ++i) {
    if (text[i] == '{') ++depth;
    if (text[i] == '}' && --depth == 0) return text.substr(open + 1, i - open - 1);
  }
  return std::nullopt;
}

}  // namespace

bool same_number(const MathNumber& a, const MathNumber& b) {
  const auto equal = [](const MathNumber& x, const MathNumber& y) {
    if (x.decimal || y.decimal) return std::round(x.value * 1e6L) == std::round(y.value * 1e6L);
    if (x.numerator && y.numerator) return *x.numerator == *y.numerator && x.denominator == y.denominator;
    return !x.big_integer.empty() && x.big_integer == y.big_integer;
  };
  if (equal(a, b)) return true;
  if (a.percent == b.percent) return false;
  MathNumber hundred;
  hundred.numerator = 100;
  hundred.value = 100;
  const auto fraction = divide(a.percent ? a : b, hundred);
  return fraction && equal(*fraction, a.percent ? b : a);
}

std::optional<std::string_view> marked_answer(std::string_view text) {
  for (std::size_t at = text.rfind("\\boxed"); at != std::string_view::npos; at = text.rfind("\\boxed", at - 1)) {
    const std::size_t open = skip_spaces(text, at + 6);
    if (open < text.size() && text[open] == '{') {
      if (const auto inside = braced(text, open)) return inside;
    }
    if (at == 0) break;
  }
  if (const std::size_t hashes = text.rfind("####"); hashes != std::string_view::npos) {
    const std::string_view after = text.substr(hashes + 4);
    return after.substr(0, after.find('\n'));
  }
  return std::nullopt;
}

std::optional<MathNumber> read_number(std::string_view text) {
  std::string s = plain_commas(text);
  for (const std::string_view spacing : {"\\!", "\\,", "\\;", "\\:", "\\ ", "~"}) s = replaced(s, spacing, " ");
  std::string_view t = trimmed(s);
  if (t.ends_with('.')) t = trimmed(t.substr(0, t.size() - 1));
  // $5$ (math), \$5 and $5 (currency).
  const auto strip_dollars = [](std::string_view& v) {
    for (bool again = true; again;) {
      again = false;
      for (const std::string_view sign : {"\\$", "$"}) {
        if (v.starts_with(sign)) {
          v = trimmed(v.substr(sign.size()));
          again = true;
        }
        if (v.ends_with(sign)) {
          v = trimmed(v.substr(0, v.size() - sign.size()));
          again = true;
        }
      }
    }
  };
  strip_dollars(t);
  // "x = 5", "n=5": the value of one variable.
  if (!t.empty() && is_letter(t[0])) {
    const std::size_t equals = skip_spaces(t, 1);
    if (equals < t.size() && t[equals] == '=') {
      t = trimmed(t.substr(equals + 1));
      strip_dollars(t);
    }
  }
  auto r = read_signed(t, 0);
  if (!r) return std::nullopt;
  std::string_view rest = trimmed(t.substr(r->end));
  if (const std::size_t end = percent_end(rest, 0); end != std::string_view::npos) {
    r->number.percent = true;
    rest = trimmed(rest.substr(end));
  }
  if (!rest.empty() && !is_unit(rest)) return std::nullopt;
  return r->number;
}

std::optional<MathNumber> completion_number(std::string_view completion) {
  const std::string text = plain_commas(completion);
  if (const auto marked = marked_answer(text)) return read_number(*marked);
  return last_number(text);
}

std::optional<MathNumber> answer_number(std::string_view answer) {
  const auto marked = marked_answer(answer);
  return read_number(marked ? *marked : answer);
}

}  // namespace ampt::reward

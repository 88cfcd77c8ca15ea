// The numbers the math reward compares: a record's answer and the one a completion gives, read
// from \boxed{...}, "#### N" or the last number in the text, and compared as numbers (3/4 equals
// \frac{3}{4} and 0.75, 1,234 equals 1234, $12 equals 12).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ampt::reward {

// A number as it was written. An integer or fraction is held exactly: in lowest terms where both
// parts fit in 64 bits, else (an integer of 19 digits or more) as its digits.
struct MathNumber {
  std::optional<int64_t> numerator;  // with the sign; the denominator is then positive
  int64_t denominator = 1;
  std::string big_integer;  // "-12345678901234567890" where the numerator does not fit
  long double value = 0;    // always set
  bool decimal = false;     // written with a decimal point: compared to 6 places
  bool percent = false;     // written with a % sign
};

// Equal as math-verify (PyPI) compares numbers: exactly, unless either was written with a
// decimal point, then rounded to 6 decimal places (its float_rounding); a percentage equals its
// number and its number / 100 (math-verify takes 50% for 50 and for 0.5).
bool same_number(const MathNumber& a, const MathNumber& b);

// The text that holds the answer: the contents of the last balanced \boxed{...}, else what
// follows the last "####" on its line, else nullopt (the whole text is to be read).
std::optional<std::string_view> marked_answer(std::string_view text);

// `text` read whole as one number: an optional sign; an integer (1,234 with thousands commas),
// a decimal (.5, 0.75), a fraction (3/4, \frac{3}{4}, \dfrac, \tfrac, \frac34); around it a
// currency sign ($, \$), "x =", a trailing % or \%, a unit (apples, \text{ km}, m^2, ^\circ) and
// LaTeX spacing. nullopt when anything else is there (\sqrt{2}, 2^3, 5 or 6).
std::optional<MathNumber> read_number(std::string_view text);

// The number a completion gives: its marked answer read whole (a \boxed{} or #### that holds no
// number gives none, whatever the text before it says), else the last number anywhere in it.
std::optional<MathNumber> completion_number(std::string_view completion);

// The number a record's answer holds: its marked answer, else the whole answer, read whole.
std::optional<MathNumber> answer_number(std::string_view answer);

}  // namespace ampt::reward

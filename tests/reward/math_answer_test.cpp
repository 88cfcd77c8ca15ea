// The math reward's reading of numbers, case by case: where a completion's answer is (the last
// \boxed{}, else ####, else its last number), each written form, and how two numbers compare.
// math_verify_test.cpp holds the same reader against math-verify on a table.
#include "ampt/reward/math_answer.h"

#include <catch2/catch.hpp>

#include <optional>
#include <string>

using ampt::reward::answer_number;
using ampt::reward::completion_number;
using ampt::reward::marked_answer;
using ampt::reward::MathNumber;
using ampt::reward::read_number;
using ampt::reward::same_number;

namespace {

// Whether `completion` gives the number the record's `answer` holds.
bool gives(const std::string& completion, const std::string& answer) {
  const auto expected = answer_number(answer);
  INFO("answer " << answer);
  REQUIRE(expected.has_value());
  const auto given = completion_number(completion);
  return given.has_value() && same_number(*given, *expected);
}

}  // namespace

TEST_CASE("reward: math reads the last balanced box, else ####, else the last number", "[reward]") {
  CHECK(marked_answer("so \\boxed{\\frac{1}{2}} and \\boxed{x_{1} = 3}.").value() == "x_{1} = 3");
  CHECK(marked_answer("\\boxed{\\boxed{3}}").value() == "3");
  // A box that never closes is not the answer; the one before it is.
  CHECK(marked_answer("\\boxed{4} then \\boxed{5").value() == "4");
  CHECK(marked_answer("\\boxed {7}").value() == "7");
  CHECK(marked_answer("a\n#### 1,234\nthanks").value() == " 1,234");
  CHECK_FALSE(marked_answer("no mark, 42").has_value());

  CHECK(gives("We get 3 + 4 = 7.", "7"));
  CHECK_FALSE(gives("We get 7, twice 3.", "7"));  // the last number is 3
  CHECK(gives("The sum is 9. #### 12", "12"));
  CHECK(gives("First 5, but \\boxed{6}. Later text 7", "6"));
  CHECK(gives("#### 5 \n\\boxed{6}", "6"));  // a box outranks ####, as in math-verify
  // A box that holds no number gives none, rather than a number from the text before it.
  CHECK_FALSE(gives("It is 2, so \\boxed{\\sqrt{2}}", "2"));
  CHECK_FALSE(gives("It is 8, so \\boxed{2^3}", "8"));
  CHECK_FALSE(completion_number("no digits here").has_value());
  CHECK_FALSE(completion_number("").has_value());
}

TEST_CASE("reward: math reads integers, decimals, fractions, signs, commas, units, $ and %", "[reward]") {
  CHECK(gives("so 1,234,567 people", "1234567"));
  CHECK(gives("so 1234567 people", "1,234,567"));
  CHECK(gives("\\boxed{1{,}000}", "1000"));
  CHECK_FALSE(gives("counts 1,2345", "12345"));  // not a thousands comma: 1 and 2345
  CHECK(gives("the list 3,4,5", "5"));
  CHECK(gives("\\boxed{\\frac{3}{4}}", "0.75"));
  CHECK(gives("\\boxed{\\dfrac{6}{8}}", "3/4"));
  CHECK(gives("it is \\tfrac{1}{2}", "\\frac{1}{2}"));
  CHECK(gives("\\boxed{\\frac34}", "3/4"));
  CHECK(gives("\\boxed{-\\frac{1}{2}}", "-1/2"));
  CHECK(gives("\\boxed{\\frac{-1}{2}}", "-0.5"));
  CHECK(gives("the ratio 3 / 4", "3/4"));
  CHECK_FALSE(gives("\\boxed{-7}", "7"));
  CHECK(gives("x = -7", "-7"));
  CHECK(gives("+7", "7"));
  CHECK(gives("2 - 3", "3"));  // a minus between numbers is no sign
  CHECK(gives("so .5", "1/2"));
  CHECK(gives("It costs $12.00.", "12"));
  CHECK(gives("\\boxed{\\$18}", "$18"));
  CHECK(gives("\\boxed{18 \\text{ apples}}", "18 apples"));
  CHECK(gives("\\boxed{5\\,\\mathrm{cm}^2}", "5"));
  CHECK(gives("\\boxed{90^\\circ}", "90"));
  CHECK(gives("\\boxed{x = 4}", "4"));
  CHECK(gives("$\\boxed{4}$.", "$4$"));
  CHECK(gives("a 100m2 flat", "100"));  // 2 inside a word is no number
  CHECK(gives("v1.5 of 3", "3"));
  CHECK_FALSE(gives("\\boxed{5x}", "5"));  // one letter is a variable, not a unit
  CHECK_FALSE(gives("\\boxed{5 or 6}", "5"));
  CHECK_FALSE(read_number("\\pi").has_value());
  CHECK_FALSE(read_number("1/0").has_value());
  CHECK_FALSE(read_number("3 + 4").has_value());
}

TEST_CASE("reward: math compares exactly, decimals to 6 places, percentages both ways", "[reward]") {
  CHECK(gives("0.333333", "1/3"));
  CHECK_FALSE(gives("0.333", "1/3"));
  CHECK(gives("3.50", "3.5"));
  CHECK_FALSE(gives("3.14159", "3.14"));
  CHECK(gives("\\boxed{\\frac{2}{4}}", "\\frac{1}{2}"));
  CHECK_FALSE(gives("\\boxed{\\frac{2}{3}}", "0.666"));
  CHECK(gives("\\boxed{\\frac{2}{3}}", "0.666667"));
  // math-verify takes 50% for 50 and for 0.5.
  CHECK(gives("\\boxed{50\\%}", "50"));
  CHECK(gives("so 50 %", "0.5"));
  CHECK(gives("it is 0.5", "50%"));
  CHECK(gives("12.5%", "12.5"));
  CHECK_FALSE(gives("50%", "5"));
  // Integers past 64 bits compare digit for digit; a fraction of such parts is no number.
  CHECK(gives("\\boxed{12345678901234567890}", "12345678901234567890"));
  CHECK_FALSE(gives("\\boxed{12345678901234567891}", "12345678901234567890"));
  CHECK(gives("\\boxed{-00012345678901234567890}", "-12345678901234567890"));
  CHECK_FALSE(read_number("12345678901234567890/3").has_value());
  CHECK(gives("\\boxed{999999999999999999/999999999999999999}", "1"));
  // Its / 100 does not fit in 64 bits: compared as a percentage only.
  CHECK_FALSE(gives("\\boxed{1/999999999999999999\\%}", "0"));
}

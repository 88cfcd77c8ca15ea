// The built-in rewards one by one: math and exact against a record's field, and the one-line
// errors for a record that lacks it or holds no number; format's regular expression, whole
// completions only, and its error for a bad pattern; DAPO's overlong punishment at the edges of
// its ramp (TRL's get_soft_overlong_punishment: max 100, cache 20, 90 tokens give -0.5).
#include "ampt/core/errors.h"
#include "ampt/core/json_reader.h"
#include "ampt/reward/builtin_rewards.h"

#include <catch2/catch.hpp>

#include <string>

using namespace ampt::reward;
using ampt::parse_json;

TEST_CASE("reward: math and exact score against the record's field", "[reward]") {
  const auto record = parse_json(R"({"prompt": "2+2?", "answer": "4", "solution": "#### 1,234", "n": 72})");
  CHECK(math_reward("so \\boxed{4}", record, "answer", "record 0") == 1.0);
  CHECK(math_reward("so \\boxed{5}", record, "answer", "record 0") == 0.0);
  CHECK(math_reward("no number", record, "answer", "record 0") == 0.0);
  CHECK(math_reward("1234", record, "solution", "record 0") == 1.0);
  CHECK(math_reward("it is 72", record, "n", "record 0") == 1.0);  // a JSON number as the answer
  CHECK(exact_reward("  4\n", record, "answer", "record 0") == 1.0);
  CHECK(exact_reward("4.0", record, "answer", "record 0") == 0.0);
  CHECK(exact_reward("\t72 ", record, "n", "record 0") == 1.0);
  CHECK(exact_reward("", parse_json(R"({"answer": " \n"})"), "answer", "record 0") == 1.0);
  CHECK(record_text(parse_json(R"({"a": 0.25})"), "a", "exact", "record 0") == "0.25");
}

TEST_CASE("reward: a record without the field, or math's answer without a number, is one line naming it",
          "[reward][errors]") {
  const auto record = parse_json(R"({"prompt": "2+2?", "solution": "4", "list": [1], "root": "\\sqrt{2}"})");
  CHECK_THROWS_MATCHES(math_reward("4", record, "answer", "record 17"), ampt::RuntimeError,
                       Catch::Message("record 17: reward math reads the record's \"answer\", which it lacks (it has: "
                                      "prompt, solution, list, root)"));
  CHECK_THROWS_MATCHES(exact_reward("4", parse_json("{}"), "answer", "record 3"), ampt::RuntimeError,
                       Catch::Message("record 3: reward exact reads the record's \"answer\", which it lacks (it has: "
                                      "no fields)"));
  CHECK_THROWS_MATCHES(exact_reward("4", record, "list", "record 5"), ampt::RuntimeError,
                       Catch::Message("record 5: reward exact reads the record's \"list\", which is an array; it must "
                                      "be a string or a number"));
  CHECK_THROWS_MATCHES(math_reward("2", record, "root", "record 8"), ampt::RuntimeError,
                       Catch::Message("record 8: reward math: the record's \"root\", \"\\sqrt{2}\", holds no number "
                                      "(an integer, decimal or fraction, alone, in \\boxed{} or after ####); score "
                                      "such answers with exact or a reward program"));
}

TEST_CASE("reward: format matches the whole completion against an ECMAScript pattern", "[reward]") {
  const FormatReward think(R"(<think>[\s\S]*</think>[\s\S]*)");
  CHECK(think("<think>a\nb</think>\nThe answer is 4.") == 1.0);
  CHECK(think("<think></think>") == 1.0);
  CHECK(think("The answer is 4.") == 0.0);
  CHECK(think(" <think>a</think>") == 0.0);  // the whole completion, not a part of it
  CHECK(think("<think>unclosed") == 0.0);
  const FormatReward boxed(R"([\s\S]*\\boxed\{\d+\}\s*)");
  CHECK(boxed("so \\boxed{12}\n") == 1.0);
  CHECK(boxed("so \\boxed{x}") == 0.0);
  // Long completions: libstdc++'s backtracking matcher recursed once per character and
  // overflowed the stack at 36 KB; this is 32,768 tokens of English at 4 characters a token.
  const std::string reasoning(131072, 'a');
  CHECK(think("<think>" + reasoning + "</think>" + std::string(13107, 'b')) == 1.0);
  CHECK(think("<think>" + reasoning) == 0.0);
  CHECK_THROWS_AS(FormatReward("<think>("), ampt::UsageError);
  CHECK_THROWS_WITH(FormatReward(R"((a)\1)"), Catch::Contains("back-reference"));
  CHECK_THROWS_WITH(FormatReward("<think>("),
                    Catch::StartsWith("reward format: the pattern \"<think>(\" is not an ECMAScript regular expression ("));
}

TEST_CASE("reward: overlong is 0 up to max - cache, then down to -1 at max, and -1 beyond", "[reward]") {
  CHECK(overlong_penalty(0, 100, 20) == 0.0);
  CHECK(overlong_penalty(80, 100, 20) == 0.0);
  CHECK(overlong_penalty(81, 100, 20) == Approx(-0.05).epsilon(1e-15));
  CHECK(overlong_penalty(90, 100, 20) == -0.5);  // TRL's docstring example
  CHECK(overlong_penalty(100, 100, 20) == -1.0);
  CHECK(overlong_penalty(101, 100, 20) == -1.0);
  CHECK(overlong_penalty(5, 10, 10) == -0.5);  // a cache as long as max: the ramp starts at 0
  CHECK(overlong_penalty(0, 10, 10) == 0.0);
}

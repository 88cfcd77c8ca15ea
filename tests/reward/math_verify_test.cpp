// The math reward against math-verify (PyPI; TRL's accuracy rewards and Open R1 score with it):
// on the table in math_cases.jsonl (boxed answers, GSM8K's ####, fractions and \frac, decimals,
// negatives, thousands commas, units, $ and %, MATH-style answers that are solutions, several
// candidate numbers, wrong answers and none), math-verify's verify(parse(answer),
// parse(completion)), run in one Python process (math_verify_reference.py), and ampt's verdict
// agree on at least 98% of the cases; each case where they differ is listed below with why.
#include "ampt/core/json_reader.h"
#include "ampt/reward/builtin_rewards.h"
#include "support/process.h"
#include "support/python_modules.h"
#include "support/skip.h"

#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace {

// (completion, answer) -> why ampt and math-verify differ there.
const std::map<std::pair<std::string, std::string>, std::string> kDisagreements = {
    // math-verify reads \dfrac only inside $...$, \[...\] or \boxed{}: parse("\dfrac{3}{4}") is
    // empty, so the answer holds nothing to compare with. ampt reads it as 3/4, equal to 9/12.
    {{"Simplifying, we obtain \\boxed{\\frac{9}{12}}.", "\\dfrac{3}{4}"}, "math-verify reads no bare \\dfrac"},
    // Two boxes: math-verify takes both as the set {7, 9}, which equals no single number; ampt
    // takes the last box, as the model's final answer.
    {{"\\boxed{7} is wrong; the answer is \\boxed{9}", "9"}, "math-verify takes both boxes as a set"},
};

}  // namespace

TEST_CASE("reward: math agrees with math-verify on the answer table", "[reward][python]") {
  if (!ampt::test::python_has("math_verify")) {
    AMPT_SKIP(reference, "skipping: math_verify missing in the virtualenv (scripts/bootstrap.sh installs "
                         "math-verify)");
  }
  const std::string cases = AMPT_SOURCE_DIR "/tests/reward/math_cases.jsonl";
  const std::string out = ampt::test::make_temp_dir() + "/verdicts.jsonl";
  const auto r = ampt::test::run_process(
      {AMPT_PYTHON, AMPT_SOURCE_DIR "/tests/reward/math_verify_reference.py", cases, out});
  INFO("tests/reward/math_verify_reference.py: exit " << r.exit_code << "\n" << r.err);
  REQUIRE(r.exit_code == 0);
  std::ifstream case_lines(cases);
  std::ifstream verdict_lines(out);
  int total = 0;
  int right = 0;
  std::map<std::pair<std::string, std::string>, std::string> differ;
  for (std::string line, verdict; std::getline(case_lines, line);) {
    REQUIRE(std::getline(verdict_lines, verdict));
    const auto record = ampt::parse_json(line);
    const std::string completion = record.find("completion")->string;
    const std::string answer = record.find("answer")->string;
    const bool reference = ampt::parse_json(verdict).boolean;
    const std::string where = "case " + std::to_string(total + 1);
    const bool ampt_says = ampt::reward::math_reward(completion, record, "answer", where) == 1.0;
    ++total;
    right += reference ? 1 : 0;
    if (ampt_says != reference) {
      differ[{completion, answer}] = reference ? "math-verify alone accepts it" : "ampt alone accepts it";
    }
  }
  CHECK(total >= 200);
  // The table holds right and wrong answers alike.
  CHECK(right > total / 4);
  CHECK(total - right > total / 4);
  for (const auto& [which, verdict] : differ) {
    INFO("completion " << which.first << "\nanswer " << which.second << "\n" << verdict);
    CHECK(kDisagreements.count(which) == 1);
  }
  for (const auto& [which, why] : kDisagreements) {
    INFO("listed, but ampt and math-verify agree: completion " << which.first << ", answer " << which.second);
    CHECK(differ.count(which) == 1);
  }
  CHECK(static_cast<double>(differ.size()) <= 0.02 * total);
}

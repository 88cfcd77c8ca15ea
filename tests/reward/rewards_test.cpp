// A run's rewards scored group by group: every term's own values in the spec's order (the log's
// rewards/<name>/mean) and each completion's weighted sum, with the reward program as one more
// term; and the errors that name the record: its answer missing or holding no number (also
// before the first step, by check_record), and lengths that are not one per completion.
#include "ampt/core/errors.h"
#include "ampt/core/json_reader.h"
#include "ampt/reward/rewards.h"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace ampt::reward;
using ampt::parse_json;

TEST_CASE("reward: a group's weighted sum and each term's values, the program's among them", "[reward]") {
  RewardSettings settings;
  settings.spec = "math,format:0.5,overlong:0.25";
  settings.format_pattern = R"(<think>[\s\S]*</think>[\s\S]*)";
  settings.overlong_max = 100;
  settings.overlong_cache = 20;
  settings.command = std::string("'") + AMPT_PYTHON + "' '" + AMPT_SOURCE_DIR "/tests/reward/programs/score.py'";
  Rewards rewards(settings);
  REQUIRE(rewards.terms().size() == 4);
  CHECK(rewards.terms()[3].name == "program");

  const auto record = parse_json(R"({"prompt": "2+2?", "answer": "4"})");
  const std::vector<std::string> completions = {"<think>easy</think>\\boxed{4}", "\\boxed{5}", "<think></think>4"};
  const std::vector<int64_t> tokens = {10, 90, 120};
  const auto scored = rewards.score(RewardGroup{record, "record 3", completions, tokens});
  REQUIRE(scored.by_term.size() == 4);
  CHECK(scored.by_term[0] == std::vector<double>{1, 0, 1});
  CHECK(scored.by_term[1] == std::vector<double>{1, 0, 1});
  CHECK(scored.by_term[2] == std::vector<double>{0, -0.5, -1});
  // score.py: 1 for a completion holding the answer, plus a thousandth of its length.
  REQUIRE(scored.by_term[3].size() == 3);
  CHECK(scored.by_term[3][0] == Approx(1.028).epsilon(1e-15));
  CHECK(scored.by_term[3][1] == Approx(0.009).epsilon(1e-15));
  CHECK(scored.by_term[3][2] == Approx(1.016).epsilon(1e-15));
  REQUIRE(scored.total.size() == 3);
  CHECK(scored.total[0] == Approx(1 + 0.5 + 0 + 1.028).epsilon(1e-15));
  CHECK(scored.total[1] == Approx(0 + 0 - 0.125 + 0.009).epsilon(1e-15));
  CHECK(scored.total[2] == Approx(1 + 0.5 - 0.25 + 1.016).epsilon(1e-15));

  // A record without a prompt sends null, which score.py checks against the record's own.
  const auto no_prompt = parse_json(R"({"answer": "4"})");
  CHECK(rewards.score(RewardGroup{no_prompt, "record 4", {"4"}, {1}}).total.size() == 1);
}

TEST_CASE("reward: a record a term cannot score is one line naming it, before the first step too",
          "[reward][errors]") {
  RewardSettings settings;
  settings.spec = "exact,math:2";
  settings.answer_field = "solution";
  Rewards rewards(settings);
  const auto lacking = parse_json(R"({"prompt": "2+2?", "answer": "4"})");
  CHECK_THROWS_MATCHES(rewards.check_record(lacking, "data/prompts.jsonl: line 12"), ampt::RuntimeError,
                       Catch::Message("data/prompts.jsonl: line 12: reward exact reads the record's \"solution\", which it lacks (it has: "
                                      "prompt, answer)"));
  CHECK_THROWS_MATCHES(rewards.score(RewardGroup{lacking, "record 12", {"4"}, {1}}), ampt::RuntimeError,
                       Catch::Message("record 12: reward exact reads the record's \"solution\", which it lacks (it has: "
                                      "prompt, answer)"));
  const auto words = parse_json(R"({"prompt": "Name it", "solution": "a triangle"})");
  CHECK_THROWS_WITH(rewards.check_record(words, "record 13"),
                    Catch::StartsWith("record 13: reward math: the record's \"solution\", \"a triangle\", holds no number"));
  const auto fine = parse_json(R"({"prompt": "2+2?", "solution": "4"})");
  rewards.check_record(fine, "record 14");
  CHECK_THROWS_MATCHES(rewards.score(RewardGroup{fine, "record 14", {"4", "5"}, {1}}), ampt::RuntimeError,
                       Catch::Message("record 14: 1 completion lengths for 2 completions"));
  const auto scored = rewards.score(RewardGroup{fine, "record 14", {" 4 ", "5"}, {1, 1}});
  CHECK(scored.total == std::vector<double>{3, 0});
}

TEST_CASE("reward: a format pattern std::regex refuses stops the run before it starts", "[reward][errors]") {
  RewardSettings settings;
  settings.spec = "format";
  settings.format_pattern = "[a-";
  CHECK_THROWS_AS(Rewards(settings), ampt::UsageError);
  settings.spec = "math";  // a pattern no term uses is not compiled
  CHECK_NOTHROW(Rewards(settings));
}

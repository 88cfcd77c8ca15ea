// `--reward NAME[:WEIGHT],...` into weighted terms, with the program's term where a command is
// given, and a one-line error for each bad spec or setting: naming the entry, its value and what
// is allowed.
#include "ampt/core/errors.h"
#include "ampt/reward/reward_spec.h"

#include <catch2/catch.hpp>

#include <string>

using namespace ampt::reward;

namespace {

RewardSettings with_spec(const std::string& spec) {
  RewardSettings settings;
  settings.spec = spec;
  return settings;
}

}  // namespace

TEST_CASE("reward: a spec is its terms in order, weight 1 unless given", "[reward]") {
  auto settings = with_spec(" math , format:0.5,exact:-2e-1");
  const auto terms = parse_reward_spec(settings);
  REQUIRE(terms.size() == 3);
  CHECK(terms[0].kind == RewardKind::math);
  CHECK(terms[0].name == "math");
  CHECK(terms[0].weight == 1.0);
  CHECK(terms[1].kind == RewardKind::format);
  CHECK(terms[1].weight == 0.5);
  CHECK(terms[2].kind == RewardKind::exact);
  CHECK(terms[2].weight == -0.2);

  settings = with_spec("overlong:0.25");
  settings.overlong_max = 512;
  settings.overlong_cache = 128;
  CHECK(parse_reward_spec(settings).at(0).kind == RewardKind::overlong);

  // A command adds the program's term, weight 1, unless the spec names it.
  settings = with_spec("math");
  settings.command = "python3 score.py";
  auto with_program = parse_reward_spec(settings);
  REQUIRE(with_program.size() == 2);
  CHECK(with_program[1].kind == RewardKind::program);
  CHECK(with_program[1].name == "program");
  CHECK(with_program[1].weight == 1.0);
  settings.spec = "program:0.3,math";
  with_program = parse_reward_spec(settings);
  REQUIRE(with_program.size() == 2);
  CHECK(with_program[0].weight == 0.3);
  settings.spec = "";
  CHECK(parse_reward_spec(settings).size() == 1);
}

TEST_CASE("reward: a bad spec is one line naming the entry, the value and what is allowed", "[reward][errors]") {
  const auto error = [](const RewardSettings& settings) {
    try {
      parse_reward_spec(settings);
    } catch (const ampt::UsageError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(error(with_spec("math,mathh")) ==
        "--reward math,mathh: unknown reward \"mathh\"; the rewards are math, exact, format, overlong and program");
  CHECK(error(with_spec("math:abc")) ==
        "--reward math:abc: the weight of math is \"abc\"; it must be a finite number, as in math:0.5");
  CHECK(error(with_spec("math:")) ==
        "--reward math:: the weight of math is \"\"; it must be a finite number, as in math:0.5");
  CHECK(error(with_spec("format:inf")) ==
        "--reward format:inf: the weight of format is \"inf\"; it must be a finite number, as in math:0.5");
  CHECK(error(with_spec("math:1e999")) ==
        "--reward math:1e999: the weight of math is \"1e999\"; it must be a finite number, as in math:0.5");
  CHECK(error(with_spec("math,,exact")) ==
        "--reward math,,exact: an entry without a name; expected NAME[:WEIGHT],... with NAME one of math, exact, "
        "format, overlong and program");
  CHECK(error(with_spec("math,")) ==
        "--reward math,: an entry without a name; expected NAME[:WEIGHT],... with NAME one of math, exact, format, "
        "overlong and program");
  CHECK(error(with_spec("math,exact,math:2")) == "--reward math,exact,math:2: math is named twice");
  CHECK(error(with_spec("program")) ==
        "--reward program: program scores with the reward program, and no --reward_command is given");
  CHECK(error(with_spec("")) ==
        "no reward: --reward names none and --reward_command is not given; the rewards are math, exact, format, "
        "overlong and program");
  auto overlong = with_spec("overlong");
  CHECK(error(overlong) == "reward overlong: its maximum length is 0 tokens; it must be at least 1");
  overlong.overlong_max = 100;
  CHECK(error(overlong) == "reward overlong: its cache is 0 tokens; it must be from 1 to the maximum length, 100 tokens");
  overlong.overlong_cache = 101;
  CHECK(error(overlong) ==
        "reward overlong: its cache is 101 tokens; it must be from 1 to the maximum length, 100 tokens");
  auto program = with_spec("");
  program.command = "python3 score.py";
  program.timeout_seconds = 0;
  CHECK(error(program) == "--reward_timeout 0: the reward program's time-out must be a positive number of seconds");
}

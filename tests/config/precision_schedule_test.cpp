// precision_schedule and keep_fp32_modules: parsing, every rejected form as one line, YAML lists,
// and the cross-checks with mixed_precision and amp_opt_level.
#include <catch2/catch.hpp>

#include "ampt/config/precision_schedule.h"
#include "ampt/core/glob.h"
#include "config_test_support.h"

using namespace ampt::config;
using namespace ampt::config::testing;

TEST_CASE("precision schedule: stages, bounds in steps or epochs, lookup by step and epoch", "[config][schedule]") {
  const auto stages = parse_precision_schedule("fp32:500, bf16:2000 ,fp16");
  REQUIRE(stages.size() == 3);
  CHECK(stages[0] == PrecisionStage{MixedPrecision::no, 500, false});
  CHECK(stages[1] == PrecisionStage{MixedPrecision::bf16, 2000, false});
  CHECK(stages[2] == PrecisionStage{MixedPrecision::fp16, -1, false});
  CHECK(stage_at(stages, 0, 0) == 0);
  CHECK(stage_at(stages, 499, 3) == 0);
  CHECK(stage_at(stages, 500, 3) == 1);
  CHECK(stage_at(stages, 1999, 0) == 1);
  CHECK(stage_at(stages, 2000, 0) == 2);
  CHECK(stage_at(stages, 1000000, 0) == 2);

  const auto epochs = parse_precision_schedule("fp16:1ep,bf16");
  CHECK(epochs[0] == PrecisionStage{MixedPrecision::fp16, 1, true});
  CHECK(stage_at(epochs, 5000, 0) == 0);
  CHECK(stage_at(epochs, 1, 1) == 1);
  CHECK(stage_text(epochs[0]) == "fp16:1ep");
  CHECK(stage_text(stages[0]) == "fp32:500");
  CHECK(schedule_problem("bf16").empty());
  CHECK(schedule_problem("").empty());  // the default: no schedule
  CHECK(precision_stages(Config{}) ==
        std::vector<PrecisionStage>{{MixedPrecision::auto_select, -1, false}});
}

TEST_CASE("precision schedule: bad strings are one-line usage errors that say what is wrong", "[config][schedule]") {
  const std::vector<std::pair<std::string, std::string>> cases{
      {"fp32:500,bf16:100,fp16", "stage 2 'bf16:100' ends at step 100, not after the previous stage's 500"},
      {"fp32:500,fp64", "stage 2 'fp64' names precision 'fp64', not fp32, bf16 or fp16"},
      {"fp32,bf16", "stage 2 'bf16' follows stage 1 'fp32', which has no bound"},
      {"fp32:500,bf16:900", "the last stage 'bf16:900' has a bound"},
      {"fp32:0,bf16", "stage 1 'fp32:0' has a bound that is not a step count"},
      {"fp32:abc,bf16", "stage 1 'fp32:abc' has a bound that is not"},
      {"fp32:1ep,bf16:500,fp16", "stage 2 'bf16:500' mixes step and epoch bounds"},
      {"bf16:10,bf16", "stage 2 'bf16' repeats the previous stage's precision bf16"},
      {"fp32:10,,bf16", "stage 2 '' is empty"},
  };
  for (const auto& [text, reason] : cases) {
    INFO(text);
    const auto message = resolve_error({"--precision_schedule", text});
    CHECK_THAT(message, Catch::StartsWith("invalid value '" + text +
                                          "' for precision_schedule (flag --precision_schedule): " +
                                          reason));
    CHECK_THAT(message, Catch::Contains("expected comma-separated PRECISION[:UNTIL] stages"));
    CHECK(message.find('\n') == std::string::npos);
  }
  CHECK_THAT(resolve_error({}, {{"AMPT_PRECISION_SCHEDULE", "fp16:5"}}),
             Catch::Contains("(env AMPT_PRECISION_SCHEDULE): the last stage 'fp16:5' has a bound"));
}

TEST_CASE("precision schedule: a YAML list of stages under amp", "[config][schedule][yaml]") {
  TempYaml yaml(
      "amp:\n"
      "  precision_schedule:\n"
      "    - {until_step: 500, precision: fp32}\n"
      "    - until_step: 2000\n"
      "      precision: bf16\n"
      "    - {precision: fp16}\n"
      "  keep_fp32_modules: [wte, 'ln_*', head]\n");
  const auto resolved = resolve_yaml(yaml);
  CHECK(resolved.config().precision_schedule == "fp32:500,bf16:2000,fp16");
  CHECK(resolved.config().keep_fp32_modules == "wte,ln_*,head");
  CHECK(describe(resolved.source_of("precision_schedule")) == yaml.at(2));

  TempYaml epochs("amp: {precision_schedule: [{until_epoch: 1, precision: fp16}, {precision: bf16}]}\n");
  CHECK(resolve_yaml(epochs).config().precision_schedule == "fp16:1ep,bf16");

  CHECK_THAT(yaml_error("amp: {precision_schedule: [{until: 5, precision: fp16}, bf16]}\n"),
             Catch::Contains("unknown key 'until' in a stage of precision_schedule (FILE:1)"));
  CHECK_THAT(yaml_error("amp: {precision_schedule: [{until_step: 5}, bf16]}\n"),
             Catch::Contains("a stage of precision_schedule (FILE:1) has no precision"));
  CHECK_THAT(yaml_error("amp: {precision_schedule: [{until_step: 500, precision: bf16}, "
                        "{until_step: 100, precision: fp16}, {precision: fp32}]}\n"),
             Catch::StartsWith("invalid value 'bf16:500,fp16:100,fp32' for precision_schedule "
                               "(FILE:1): stage 2 'fp16:100' ends at step 100"));
}

TEST_CASE("precision schedule: mixed_precision set explicitly must agree with the last stage", "[config][schedule]") {
  CHECK(resolve({"--precision_schedule", "fp32:5,bf16"}, {}).config().mixed_precision ==
        MixedPrecision::auto_select);  // the default: not explicit
  CHECK(resolve({"--precision_schedule", "fp32:5,fp16", "--mixed_precision", "fp16"}, {})
            .config()
            .precision_schedule == "fp32:5,fp16");
  CHECK(resolve_error({"--precision_schedule", "fp32:5,fp16", "--mixed_precision", "bf16"}) ==
        "mixed_precision bf16 (flag --mixed_precision) contradicts precision_schedule "
        "'fp32:5,fp16' (flag --precision_schedule), which ends in fp16: leave mixed_precision "
        "unset or set it to the schedule's last precision");
}

TEST_CASE("opt level O2 needs a half precision: with mixed_precision no it is a usage error", "[config][o2]") {
  CHECK(resolve({"--amp_opt_level", "O2"}, {}).config().amp_opt_level == OptLevel::O2);
  CHECK(resolve_error({"--amp_opt_level", "O2", "--mixed_precision", "no"}) ==
        "amp_opt_level O2 (flag --amp_opt_level) keeps weights in a half dtype, but "
        "mixed_precision is no (flag --mixed_precision): use bf16, fp16 or auto with O2, or "
        "O0/O1 for fp32");
  // A schedule may hold fp32 stages under O2: there the masters are the weights.
  CHECK(resolve({"--amp_opt_level", "O2", "--precision_schedule", "fp32:10,bf16"}, {})
            .config()
            .amp_opt_level == OptLevel::O2);
  CHECK_THAT(resolve_error({"--amp_opt_level", "O3"}), Catch::Contains("expected one of O0, O1, O2"));
}

TEST_CASE("keep_fp32_modules: comma-separated patterns, bad characters rejected", "[config][o2]") {
  CHECK(split_module_patterns("wte, ln_*,*.norm") == std::vector<std::string>{"wte", "ln_*", "*.norm"});
  CHECK(split_module_patterns("").empty());
  CHECK(resolve({"--keep_fp32_modules", "wte,ln_*"}, {}).config().keep_fp32_modules == "wte,ln_*");
  CHECK_THAT(resolve_error({"--keep_fp32_modules", "wte,,ln_f"}),
             Catch::StartsWith("invalid value 'wte,,ln_f' for keep_fp32_modules (flag "
                               "--keep_fp32_modules): pattern '' is not valid"));
  CHECK_THAT(resolve_error({"--keep_fp32_modules", "h[0]"}), Catch::Contains("pattern 'h[0]' is not valid"));
}

TEST_CASE("glob: stars cross dots, question marks take one character", "[config][o2]") {
  CHECK(ampt::glob_match("ln_*", "ln_f"));
  CHECK(ampt::glob_match("h.*.ln_1", "h.10.ln_1"));
  CHECK(ampt::glob_match("*.norm", "blocks.0.norm"));
  CHECK(ampt::glob_match("h.?.attn", "h.3.attn"));
  CHECK_FALSE(ampt::glob_match("h.?.attn", "h.13.attn"));
  CHECK_FALSE(ampt::glob_match("ln_*", "h.0.ln_1"));  // suffix matching is the caller's
  CHECK(ampt::glob_match("*", ""));
  CHECK_FALSE(ampt::glob_match("wte", "wtex"));
}

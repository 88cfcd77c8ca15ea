// report_to: the targets of each value, YAML lists and env, and every bad value as one line that
// names the allowed ones.
#include <catch2/catch.hpp>

#include "ampt/config/report_to.h"
#include "config_test_support.h"

using namespace ampt::config;
using namespace ampt::config::testing;

namespace {

std::tuple<bool, bool, bool, bool> targets(std::string_view text) {
  const auto t = report_targets(text);
  return {t.jsonl, t.tensorboard, t.csv, t.plot};
}

}  // namespace

TEST_CASE("report_to: each value's targets, plot bringing metrics.jsonl with it", "[config][report_to]") {
  CHECK(Config{}.report_to == "jsonl");
  CHECK(targets("jsonl") == std::tuple{true, false, false, false});
  CHECK(targets("tensorboard") == std::tuple{false, true, false, false});
  CHECK(targets(" csv , tensorboard") == std::tuple{false, true, true, false});
  CHECK(targets("plot") == std::tuple{true, false, false, true});
  CHECK(targets("all") == std::tuple{true, true, true, true});
  CHECK(targets("none") == std::tuple{false, false, false, false});
  CHECK(report_to_problem("jsonl,tensorboard,csv,plot").empty());
}

TEST_CASE("report_to: flag, YAML list and env", "[config][report_to]") {
  CHECK(resolve({"--report_to", "tensorboard,csv"}, {}).config().report_to == "tensorboard,csv");
  TempYaml yaml("run:\n  report_to: [tensorboard, plot]\n");
  CHECK(resolve_yaml(yaml).config().report_to == "tensorboard,plot");
  CHECK(resolve({}, {{"AMPT_REPORT_TO", "all"}}).config().report_to == "all");
}

TEST_CASE("report_to: bad values are one-line usage errors naming the allowed values", "[config][report_to]") {
  const std::string allowed = std::string(kReportToExpected);
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
      {{"--report_to", "tensorbord"},
       "invalid value 'tensorbord' for report_to (flag --report_to): 'tensorbord' is not a report "
       "target (did you mean 'tensorboard'?); expected " + allowed},
      {{"--report_to", "jsonl,wandb"},
       "invalid value 'jsonl,wandb' for report_to (flag --report_to): 'wandb' is not a report "
       "target; expected " + allowed},
      {{"--report_to", "none,csv"},
       "invalid value 'none,csv' for report_to (flag --report_to): none cannot be combined with "
       "other targets; expected " + allowed},
      {{"--report_to", ""},
       "invalid value '' for report_to (flag --report_to): '' is not a report target; expected " +
           allowed},
  };
  for (const auto& [args, message] : cases) {
    INFO(args[1]);
    const auto error = resolve_error(args);
    CHECK(error == message);
    CHECK(error.find('\n') == std::string::npos);
  }
  CHECK_THAT(resolve_error({}, {{"AMPT_REPORT_TO", "csv,tb"}}),
             Catch::StartsWith("invalid value 'csv,tb' for report_to (env AMPT_REPORT_TO): 'tb' is "
                               "not a report target"));
  CHECK_THAT(yaml_error("run:\n  report_to: [jsonl, mlflow]\n"),
             Catch::StartsWith("invalid value 'jsonl,mlflow' for report_to (FILE:2): 'mlflow' is "
                               "not a report target"));
}

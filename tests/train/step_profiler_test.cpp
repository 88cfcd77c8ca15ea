// --profile: a trace and an operator table of the chosen steps, with ampt's step phases named.
#include "support/process.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <sstream>

using ampt::test::make_temp_dir;
using ampt::test::read_file;
using ampt::test::run_ampt;

namespace {

// The calls/step column of `name`'s row in a profile table, -1 when it has none.
double calls_per_step(const std::string& table, const std::string& name) {
  std::istringstream lines(table);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::string first, kind;
    double calls = 0.0;
    if (fields >> first >> kind >> calls && first == name) return calls;
  }
  return -1.0;
}

}  // namespace

TEST_CASE("profile: steps 3-4 of a GPT run give a trace and a table with the step phases",
          "[train][profile]") {
  const auto out = make_temp_dir();
  const auto r = run_ampt({"train", "--model", "gpt-tiny", "--batch_size", "4", "--max_steps", "5",
                           "--grad_accum_steps", "2", "--profile", "3-4", "--output_dir", out,
                           "--val_fraction", "0"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const auto trace = out + "/profile-steps-3-4.json";
  const auto table_path = out + "/profile-steps-3-4.txt";
  CHECK_THAT(r.out, Catch::Contains("[PERF] Profile of steps 3-4: trace " + trace));
  REQUIRE(std::filesystem::exists(trace));
  REQUIRE(std::filesystem::exists(table_path));
  CHECK_THAT(read_file(trace), Catch::Contains("\"ampt::backward\""));
  const auto table = read_file(table_path);
  // Two micro-batches per step: forward, backward and data twice, the rest once.
  CHECK(calls_per_step(table, "ampt::forward") == 2.0);
  CHECK(calls_per_step(table, "ampt::backward") == 2.0);
  for (const auto* phase : {"ampt::unscale", "ampt::clip", "ampt::optimizer",
                            "ampt::scaler_update", "ampt::monitor", "ampt::zero_grad",
                            "ampt::data_wait"}) {
    INFO(phase);
    CHECK(calls_per_step(table, phase) == 1.0);
  }
  CHECK(calls_per_step(table, "aten::_fused_adamw_") == 2.0);  // decay and no-decay groups
}

TEST_CASE("profile: a range past the run's end traces what there is, and no range traces nothing",
          "[train][profile]") {
  const auto out = make_temp_dir();
  auto r = run_ampt({"train", "--max_steps", "3", "--profile", "2-9", "--output_dir", out});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(std::filesystem::exists(out + "/profile-steps-2-3.txt"));
  const auto plain = make_temp_dir();
  r = run_ampt({"train", "--max_steps", "3", "--output_dir", plain});
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, !Catch::Contains("[PERF] Profile"));
}

TEST_CASE("profile: a range that is not one is a usage error saying what is allowed",
          "[train][profile]") {
  for (const std::string bad : {"3-1", "0", "x", "2-", "-3"}) {
    INFO(bad);
    const auto r = run_ampt({"train", "--profile", bad});
    CHECK(r.exit_code == 2);
    CHECK(r.err == "ampt: error: invalid value '" + bad +
                       "' for profile (flag --profile): expected an optimizer step N or a range "
                       "A-B of them (1-based, A <= B), e.g. 10-12\n");
  }
}

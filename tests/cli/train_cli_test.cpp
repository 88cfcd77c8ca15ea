// The issue's acceptance runs, as a user types them: the loss falls and fp16 recovers from an
// absurd initial scale. Results are read from the run's own summary.json and metrics.jsonl.
#include "support/json_field.h"
#include "support/process.h"

#include <catch2/catch.hpp>


using ampt::test::json_field;
using ampt::test::make_temp_dir;
using ampt::test::read_file;
using ampt::test::run_ampt;

TEST_CASE("cli train: bf16 for 300 steps ends well below the initial loss", "[cli][train]") {
  const auto dir = make_temp_dir();
  const auto r = run_ampt({"train", "--mixed_precision", "bf16", "--max_steps", "300",
                           "--device", "cpu", "--output_dir", dir});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("[AMP] Using BF16 mixed precision (mixed_precision from flag --mixed_precision)"));
  CHECK_THAT(r.out, Catch::Contains("Using GradScaler: no"));
  const auto summary = read_file(dir + "/summary.json");
  CHECK(json_field(summary, "steps") == 300);
  CHECK(json_field(summary, "final_loss") < 0.5 * json_field(summary, "initial_loss"));
  // Step 1 and every log_every (100) steps: 4 lines, then the final evaluation and checkpoint.
  const auto metrics = read_file(dir + "/metrics.jsonl");
  CHECK(std::count(metrics.begin(), metrics.end(), '\n') == 6);
  CHECK_THAT(metrics, Catch::Contains(R"({"step": 300, "event": "checkpoint", "path": ")"));
  CHECK_THAT(metrics, Catch::Contains(R"({"step": 300, "val_loss": )"));
  CHECK(json_field(summary, "final_val_loss") < 0.5 * json_field(summary, "initial_loss"));
}

TEST_CASE("cli train: the summary's throughput is the metrics lines' steady state and the wall time adds up", "[cli][train]") {
  const auto dir = make_temp_dir();
  const auto r = run_ampt({"train", "--max_steps", "60", "--log_every", "10", "--eval_every", "20",
                           "--save_every", "25", "--device", "cpu", "--output_dir", dir});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  // The reference: every logged interval after the first, from metrics.jsonl's own figures.
  const auto steps = ampt::test::lines_with(read_file(dir + "/metrics.jsonl"), "\"samples_per_sec\"");
  REQUIRE(steps.size() == 7);  // steps 1, 10, ..., 60
  double samples = 0.0;
  double seconds = 0.0;
  for (size_t i = 1; i < steps.size(); ++i) {
    const double interval = (json_field(steps[i], "step") - json_field(steps[i - 1], "step")) * 128;
    samples += interval;
    seconds += interval / json_field(steps[i], "samples_per_sec");
  }
  const auto summary = read_file(dir + "/summary.json");
  CHECK(json_field(summary, "samples_per_sec") == Approx(samples / seconds).epsilon(1e-9));
  CHECK(json_field(summary, "steady_first_step") == 2);
  CHECK(json_field(summary, "steady_last_step") == 60);
  const double parts = json_field(summary, "startup_seconds") + json_field(summary, "training_seconds") +
                       json_field(summary, "eval_seconds") + json_field(summary, "checkpoint_seconds");
  CHECK(json_field(summary, "seconds") == Approx(parts).epsilon(1e-9));
  CHECK(json_field(summary, "startup_seconds") > 0.0);
  CHECK(json_field(summary, "eval_seconds") > 0.0);  // steps 20, 40 and the final one
  CHECK(json_field(summary, "checkpoint_seconds") > 0.0);
  CHECK(json_field(summary, "checkpoints_saved") == 3);  // steps 25, 50 and 60
  CHECK_THAT(r.out, Catch::Contains("Throughput:       ") && Catch::Contains(" samples/s steady state (steps 2-60"));
  CHECK_THAT(r.out, Catch::Contains("Wall Time:        ") && Catch::Contains("training ") &&
                        Catch::Contains("(60 steps), evaluation "));
}

TEST_CASE("cli train: fp16 with init scale 2^40 skips steps, backs off, and learns", "[cli][train]") {
  const auto dir = make_temp_dir();
  const auto r = run_ampt({"train", "--mixed_precision", "fp16", "--grad_scaler_init",
                           "1099511627776", "--max_steps", "300", "--device", "cpu",
                           "--output_dir", dir});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("[AMP] GradScaler: on (init_scale=1099511627776"));
  CHECK_THAT(r.out, Catch::Contains("[AMP Stats] Scale: "));
  const auto summary = read_file(dir + "/summary.json");
  CHECK(json_field(summary, "skipped_steps") > 0);
  CHECK(json_field(summary, "final_scale") < json_field(summary, "initial_scale"));
  CHECK(json_field(summary, "final_loss") < 0.5 * json_field(summary, "initial_loss"));
}

TEST_CASE("cli train: O0 runs fp32 with the AMP statistics on", "[cli][train]") {
  const auto dir = make_temp_dir();
  const auto r = run_ampt({"train", "--amp_opt_level", "O0", "--mixed_precision", "fp16",
                           "--max_steps", "20", "--log_every", "10", "--output_dir", dir},
                          {{"AMPT_DEVICE", "cpu"}});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("[AMP] Using FP32 precision"));
  CHECK_THAT(r.out, Catch::Contains("[AMP Stats] Loss scaling: off, Non-finite steps: 0"));
}

TEST_CASE("cli train: --mixed_precision auto says what it chose and why", "[cli][train]") {
  const auto dir = make_temp_dir();
  const auto r = run_ampt({"train", "--mixed_precision", "auto", "--max_steps", "3", "--device",
                           "cpu", "--output_dir", dir});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("(mixed_precision from flag --mixed_precision)"));
  CHECK_THAT(r.out, Catch::Contains("[AMP] auto: this CPU"));
  CHECK_THAT(r.out, Catch::Contains("[AMP] Using BF16 mixed precision") ||
                        Catch::Contains("[AMP] Using FP32 precision"));
}

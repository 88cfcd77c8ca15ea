// Whole runs of the binary for the numerical-health features: a diverging run stops with a
// diagnosis and a checkpoint, --deterministic repeats its losses exactly, the autocast cache
// changes nothing numerically, and the health fields reach the log and metrics.jsonl.
#include "support/process.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <regex>

using ampt::test::make_temp_dir;
using ampt::test::read_file;
using ampt::test::run_ampt;

namespace {

// Every `"key": value` of a metrics file, as written (JSON numbers in shortest round-trip form,
// so equal text means bit-equal doubles).
std::vector<std::string> field_values(const std::string& metrics, const std::string& key) {
  std::vector<std::string> values;
  const std::regex pattern("\"" + key + "\": ([^,}]+)");
  for (auto it = std::sregex_iterator(metrics.begin(), metrics.end(), pattern);
       it != std::sregex_iterator(); ++it) {
    values.push_back((*it)[1]);
  }
  return values;
}

}  // namespace

TEST_CASE("cli stability: an absurd learning rate diverges and the run saves, diagnoses and stops", "[cli][stability]") {
  const auto dir = make_temp_dir();
  const auto r = run_ampt({"train", "--mixed_precision", "bf16", "--lr", "1e30", "--warmup_steps",
                           "0", "--max_steps", "300", "--max_consecutive_skips", "5",
                           "--device", "cpu", "--output_dir", dir});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.out, Catch::Contains("[AMP] Stability monitor: save and stop after 5 skipped steps in a row"));
  CHECK_THAT(r.out, Catch::Contains("[AMP] Skipped step 2: non-finite loss; non-finite gradient in '"));
  CHECK_THAT(r.err, Catch::Contains("ampt: error: training stopped after step "));
  CHECK_THAT(r.err, Catch::Contains("5 steps in a row were skipped (steps 2-6)"));
  CHECK_THAT(r.err, Catch::Contains("(saved " + dir + "/ckpt-"));
  CHECK_THAT(r.err, Catch::EndsWith("Next: lower the learning rate (--lr 1e+29)\n"));
  // One line of error; before it, at most the warning that bf16 is emulated on this CPU.
  const auto lines = std::count(r.err.begin(), r.err.end(), '\n');
  CHECK((lines == 1 || (lines == 2 && r.err.starts_with("ampt: warning: this CPU"))));
  CHECK(std::filesystem::exists(dir + "/latest"));
}

TEST_CASE("cli stability: fp16 overflowing at min_loss_scale stops with the fp16 advice", "[cli][stability]") {
  const auto dir = make_temp_dir();
  const auto r = run_ampt({"train", "--mixed_precision", "fp16", "--grad_scaler_init", "2",
                           "--min_loss_scale", "1", "--lr", "1e30", "--warmup_steps", "0",
                           "--max_steps", "100", "--batch_size", "32", "--device", "cpu",
                           "--output_dir", dir});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.out, Catch::Contains("min_loss_scale=1"));
  CHECK_THAT(r.err, Catch::Contains("overflowed with the loss scale already at min_loss_scale 1"));
  CHECK_THAT(r.err, Catch::Contains("to bf16"));
  CHECK(std::filesystem::exists(dir + "/latest"));
}

TEST_CASE("cli stability: two --deterministic runs give identical losses", "[cli][stability]") {
  // Dropout and two loader threads: every random draw and the batch order must be seeded. Two
  // intra-op threads, as a run has them: before ampt set MKL's vector math up on one thread at
  // startup (device/cpu_math.h), about one process in 25 computed the OpenMP worker's share of
  // exp another way, and such a pair of runs differed.
  auto run = [] {
    const auto dir = make_temp_dir();
    const auto r = run_ampt({"train", "--deterministic", "--model", "gpt-tiny", "--dropout", "0.1",
                             "--batch_size", "8", "--max_steps", "12", "--log_every", "1",
                             "--loader_workers", "2", "--device", "cpu", "--output_dir", dir});
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("deterministic algorithms, seed 1337"));
    return field_values(read_file(dir + "/metrics.jsonl"), "loss");
  };
  const auto first = run();
  const auto second = run();
  CHECK(first.size() == 12);
  CHECK(first == second);
}

TEST_CASE("cli stability: the autocast cache changes no loss", "[cli][stability]") {
  auto losses = [](const std::string& cache) {
    const auto dir = make_temp_dir();
    const auto r = run_ampt({"train", "--autocast_cache=" + cache, "--max_steps", "10",
                             "--log_every", "1", "--device", "cpu", "--output_dir", dir});
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    if (cache == "false") CHECK_THAT(r.out, Catch::Contains("autocast cache off"));
    return field_values(read_file(dir + "/metrics.jsonl"), "loss");
  };
  const auto on = losses("true");
  CHECK(on.size() == 10);
  CHECK(on == losses("false"));
}

TEST_CASE("cli stability: the health line and metrics carry underflow and hysteresis", "[cli][stability]") {
  const auto dir = make_temp_dir();
  const auto r = run_ampt({"train", "--mixed_precision", "fp16", "--grad_scaler_rules",
                           "deepspeed", "--hysteresis", "2", "--initial_scale_power", "40",
                           "--max_steps", "40", "--log_every", "20", "--batch_size", "32",
                           "--device", "cpu", "--output_dir", dir});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("[AMP] GradScaler: on (init_scale=1099511627776, growth_factor=2, "
                                    "backoff_factor=0.5, growth_interval=2000, rules=deepspeed, "
                                    "hysteresis=2, consecutive_hysteresis=false)"));
  CHECK_THAT(r.out, Catch::Contains(", Hysteresis: "));
  CHECK_THAT(r.out, Catch::Contains(", Grad underflow: "));
  const auto metrics = read_file(dir + "/metrics.jsonl");
  const auto underflow = field_values(metrics, "grad_underflow");
  REQUIRE(underflow.size() == 3);  // steps 1, 20, 40
  for (const auto& value : underflow) {
    const double fraction = std::stod(value);
    CHECK(fraction >= 0.0);
    CHECK(fraction <= 1.0);
  }
  CHECK(field_values(metrics, "hysteresis").size() == 3);

  const auto fp32_dir = make_temp_dir();
  const auto fp32 = run_ampt({"train", "--mixed_precision", "no", "--max_steps", "2",
                              "--device", "cpu", "--output_dir", fp32_dir});
  REQUIRE(fp32.exit_code == 0);
  CHECK(field_values(read_file(fp32_dir + "/metrics.jsonl"), "grad_underflow") ==
        std::vector<std::string>{"null", "null"});
}

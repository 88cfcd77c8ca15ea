// --report_to and ampt plot as a user runs them. The files are checked by
// tests/cli/check_run_outputs.py with independent readers against the run's metrics.jsonl:
// TensorBoard's own EventAccumulator (every tag, every value, one value per step, the event file
// cut inside its last record), a Lightning-rules CSV writer, and Python's XML parser for run.svg.
#include "support/json_field.h"
#include "support/process.h"
#include "support/skip.h"
#include "support/python_modules.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <csignal>
#include <filesystem>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using ampt::test::json_field;
using ampt::test::make_temp_dir;
using ampt::test::read_file;
using ampt::test::run_ampt;
using ampt::test::run_process;

namespace {

bool python_has_tensorboard() {
  if (!ampt::test::python_has("tensorboard")) {
    AMPT_NOTE_SKIP(reference, "skipping the reference checks: no tensorboard in " AMPT_PYTHON);
    return false;
  }
  return true;
}

// Trains with `args` into `dir`, and returns `ampt config` for the same arguments (what the
// run stores as its "config" text).
std::string train(const std::vector<std::string>& args, const std::string& dir) {
  std::vector<std::string> argv = {"train"};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.insert(argv.end(), {"--device", "cpu", "--output_dir", dir});
  const auto r = run_ampt(argv);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  argv.front() = "config";
  const auto config = run_ampt(argv);
  REQUIRE(config.exit_code == 0);
  static int runs = 0;
  const auto path = fmt::format("{}.config.{}.txt", dir, ++runs);
  ampt::test::write_file(path, config.out);
  return path;
}

// Runs the reference checks; their output says what was compared.
std::string check(const std::string& dir, const std::string& checks, const std::string& config = "") {
  std::vector<std::string> argv = {AMPT_PYTHON, AMPT_SOURCE_DIR "/tests/cli/check_run_outputs.py",
                                   dir, checks};
  if (!config.empty()) argv.insert(argv.end(), {"--config-text", config});
  const auto r = run_process(argv);
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  return r.out;
}

std::vector<fs::path> event_files(const std::string& dir) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) files.push_back(entry.path());
  return files;
}

}  // namespace

TEST_CASE("report_to all: an MLP with an fp32-to-fp16 schedule, every tag and value as in metrics.jsonl", "[cli][report_to]") {
  if (!python_has_tensorboard()) return;
  const auto dir = make_temp_dir() + "/run";
  const auto config = train({"--report_to", "all", "--max_steps", "40", "--log_every", "5",
                             "--eval_every", "10", "--precision_schedule", "fp32:20,fp16",
                             "--grad_scaler_init", "1099511627776"},
                            dir);
  // The run exercises every mark: a precision switch, loss scaling and skipped steps.
  const auto metrics = read_file(dir + "/metrics.jsonl");
  CHECK_THAT(metrics, Catch::Contains(R"("event": "precision_switch")"));
  CHECK(json_field(read_file(dir + "/summary.json"), "skipped_steps") > 0);
  const auto out = check(dir, "tensorboard,truncated,csv,svg", config);
  CHECK_THAT(out, Catch::Contains("ok: tensorboard:") && Catch::Contains("ok: truncated:") &&
                      Catch::Contains("ok: csv:") && Catch::Contains("ok: svg:"));
}

TEST_CASE("report_to all: gpt-tiny logs tokens/s and perplexity", "[cli][report_to]") {
  if (!python_has_tensorboard()) return;
  const auto dir = make_temp_dir() + "/run";
  const auto config = train({"--report_to", "tensorboard,csv,plot", "--model", "gpt-tiny",
                             "--max_steps", "10", "--log_every", "5", "--eval_every", "5",
                             "--eval_batches", "2", "--batch_size", "8", "--mixed_precision", "fp16",
                             "--grad_scaler_rules", "deepspeed", "--hysteresis", "2"},
                            dir);
  const auto csv = read_file(dir + "/metrics.csv");
  const auto header = csv.substr(0, csv.find('\n'));
  CHECK_THAT(header, Catch::Contains("perf/tokens_per_sec") && Catch::Contains("val/perplexity") &&
                         Catch::Contains("amp/grad_underflow") && Catch::Contains("amp/hysteresis"));
  const auto out = check(dir, "tensorboard,csv,svg", config);
  CHECK_THAT(out, Catch::Contains("ok: svg:"));
}

TEST_CASE("report_to all: a run resumed after a kill mid-write continues its files, one value per step", "[cli][report_to]") {
  if (!python_has_tensorboard()) return;
  const auto dir = make_temp_dir() + "/run";
  const std::vector<std::string> args = {"--report_to", "all", "--max_steps", "30", "--log_every",
                                         "5", "--eval_every", "10", "--save_every", "10",
                                         "--keep_checkpoints", "5"};
  const auto config = train(args, dir);
  const auto tb = event_files(dir + "/tb");
  REQUIRE(tb.size() == 1);
  fs::resize_file(tb.front(), fs::file_size(tb.front()) - 3);  // killed inside its last record
  auto resumed = args;
  resumed.insert(resumed.end(), {"--resume", dir + "/ckpt-00000010.pt"});
  train(resumed, dir);
  CHECK(event_files(dir + "/tb") == tb);  // continued, not replaced
  CHECK_FALSE(fs::exists(dir + "/tb.1"));
  // Steps 15 to 30 were logged twice, by the first run and the resumed one: each tag keeps one
  // value per step, the resumed run's, as metrics.jsonl does; the resumed run stores its
  // configuration at step 10.
  const auto out = check(dir, "tensorboard,csv,svg", config);
  CHECK_THAT(out, Catch::Contains("config at steps [0, 10]"));
}

TEST_CASE("report_to all: a run stopped by an error or a preemption signal keeps every logged step", "[cli][report_to]") {
  if (!python_has_tensorboard()) return;
  // Diverges: the stability monitor saves and stops the run with an error, exit 1.
  const auto diverged = make_temp_dir() + "/run";
  const auto r = run_ampt({"train", "--report_to", "all", "--lr", "1e30", "--warmup_steps", "0",
                           "--max_steps", "300", "--log_every", "1", "--max_consecutive_skips", "5",
                           "--device", "cpu", "--output_dir", diverged});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 1);
  CHECK_FALSE(fs::exists(diverged + "/run.svg"));  // drawn at the end of a run, not after an error
  CHECK_THAT(check(diverged, "tensorboard,csv"), Catch::Contains("ok: csv:"));

  // Preempted: SIGUSR1, the step finishes, the run saves and exits 75.
  const auto preempted = make_temp_dir() + "/run";
  ampt::test::Child child({AMPT_BINARY, "train", "--report_to", "all", "--max_steps", "100000",
                           "--log_every", "1", "--synthetic_samples", "4096", "--batch_size", "64",
                           "--device", "cpu", "--output_dir", preempted},
                          fs::path(preempted).parent_path().string());
  REQUIRE(ampt::test::wait_until(
      [&] { return fs::exists(preempted + "/metrics.csv") && fs::file_size(preempted + "/metrics.csv") > 0; },
      60));
  child.signal(SIGUSR1);
  CHECK(child.wait() == 75);
  CHECK_THAT(check(preempted, "tensorboard,csv,svg"), Catch::Contains("ok: svg:"));
}

TEST_CASE("report_to: each target writes its own files, and none only summary.json", "[cli][report_to]") {
  const auto files = [](const std::string& dir) {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(dir)) {
      const auto name = entry.path().filename().string();
      if (!name.starts_with("ckpt-") && name != "latest") names.push_back(name);
    }
    std::ranges::sort(names);
    return names;
  };
  const auto root = make_temp_dir();
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"none", {"summary.json"}},
      {"jsonl", {"metrics.jsonl", "summary.json"}},
      {"tensorboard", {"summary.json", "tb"}},
      {"csv", {"metrics.csv", "summary.json"}},
      {"plot", {"metrics.jsonl", "run.svg", "summary.json"}},
      {"all", {"metrics.csv", "metrics.jsonl", "run.svg", "summary.json", "tb"}},
  };
  for (const auto& [value, expected] : cases) {
    INFO(value);
    const auto dir = root + "/" + value;
    const auto r = run_ampt({"train", "--report_to", value, "--max_steps", "2", "--device", "cpu",
                             "--output_dir", dir});
    REQUIRE(r.exit_code == 0);
    CHECK(files(dir) == expected);
    CHECK((r.out.find("Metrics:") != std::string::npos) ==
          (std::ranges::find(expected, "metrics.jsonl") != expected.end()));
  }
  // A fresh run in the same directory keeps the earlier run's files.
  const auto again = run_ampt({"train", "--report_to", "all", "--max_steps", "2", "--device", "cpu",
                               "--output_dir", root + "/all"});
  REQUIRE(again.exit_code == 0);
  CHECK(files(root + "/all") ==
        std::vector<std::string>{"metrics.1.csv", "metrics.1.jsonl", "metrics.csv", "metrics.jsonl",
                                 "run.svg", "summary.json", "tb", "tb.1"});
  CHECK(event_files(root + "/all/tb").size() == 1);
  CHECK(event_files(root + "/all/tb.1").size() == 1);
}

TEST_CASE("ampt plot: draws any run directory after the fact, with one-line errors", "[cli][plot]") {
  const auto dir = make_temp_dir() + "/run";
  train({"--max_steps", "20", "--log_every", "5"}, dir);
  CHECK_FALSE(fs::exists(dir + "/run.svg"));
  const auto r = run_ampt({"plot", dir});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out == "wrote " + dir + "/run.svg\n");
  if (python_has_tensorboard()) check(dir, "svg");
  const auto elsewhere = run_ampt({"plot", dir, "--out", dir + "/other.svg"});
  CHECK(elsewhere.exit_code == 0);
  CHECK(read_file(dir + "/other.svg") == read_file(dir + "/run.svg"));

  const auto none = run_ampt({"plot"});
  CHECK(none.exit_code == 2);
  CHECK(none.err == "ampt: error: ampt plot needs RUN_DIR; see ampt plot --help\n");
  const auto typo = run_ampt({"plot", dir, "--outt", "x.svg"});
  CHECK(typo.exit_code == 2);
  CHECK(typo.err == "ampt: error: unknown flag '--outt' (did you mean '--out'?)\n");
  const auto empty = make_temp_dir();
  const auto missing = run_ampt({"plot", empty});
  CHECK(missing.exit_code == 1);
  CHECK(missing.err == "ampt: error: no metrics.jsonl in '" + empty +
                           "': ampt plot draws the steps a run logged there (ampt train "
                           "--report_to jsonl, the default)\n");
  const auto help = run_ampt({"plot", "--help"});
  CHECK(help.exit_code == 0);
  CHECK_THAT(help.out, Catch::Contains("RUN_DIR") && Catch::Contains("--out"));
}

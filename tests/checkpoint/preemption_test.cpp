// Real processes, real signals: SIGTERM/SIGUSR1 save and exit for requeue (waiting for a save
// still being written), a second SIGINT exits at once, and SIGKILL in the middle of a background
// write never leaves a broken checkpoint.
#include "ampt/checkpoint/checkpoint.h"

#include "support/json_field.h"
#include "support/process.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <csignal>
#include <filesystem>
#include <random>
#include <thread>

namespace fs = std::filesystem;
using ampt::test::Child;
using ampt::test::wait_until;

namespace {

std::vector<std::string> long_run(const std::string& dir, std::vector<std::string> extra = {}) {
  std::vector<std::string> argv{AMPT_BINARY, "train", "--output_dir", dir, "--device", "cpu",
                                "--synthetic_samples", "4096", "--batch_size", "64",
                                "--max_steps", "100000", "--log_every", "1"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

bool has_logged(const std::string& dir) {
  return fs::exists(dir + "/metrics.jsonl") && fs::file_size(dir + "/metrics.jsonl") > 0;
}

}  // namespace

TEST_CASE("preemption: SIGTERM and SIGUSR1 finish the step, save, and exit 75", "[checkpoint][signals]") {
  for (int signal : {SIGTERM, SIGUSR1}) {
    const auto dir = ampt::test::make_temp_dir();
    Child child(long_run(dir), dir);
    REQUIRE(wait_until([&] { return has_logged(dir); }, 60));
    child.signal(signal);
    const int status = child.wait();
    INFO(child.out() << child.err());
    CHECK(status == 75);
    CHECK_THAT(child.out(), Catch::Contains("[CKPT] Stopped by") &&
                                Catch::Contains("exit status 75: requeue"));
    const auto latest = ampt::checkpoint::find_latest(dir);
    REQUIRE(latest);
    const auto saved = ampt::checkpoint::load(*latest);
    CHECK(saved.step > 0);

    // The requeued job picks up where this one stopped.
    const auto resumed = ampt::test::run_process(
        long_run(dir, {"--resume", "auto", "--max_steps", std::to_string(saved.step + 3)}));
    CHECK(resumed.exit_code == 0);
    CHECK_THAT(resumed.out, Catch::Contains("Resumed from " + *latest));
    CHECK(ampt::checkpoint::load(*ampt::checkpoint::find_latest(dir)).step == saved.step + 3);
  }
}

TEST_CASE("preemption: a stop during a background write waits for it, then saves the last step", "[checkpoint][signals]") {
  // About 100 MB per checkpoint, saved after every step of one sample: the stop mostly comes
  // while the previous step's checkpoint is still being written. Tried until one did (the final
  // save reports time spent waiting for that write), at most 5 times.
  bool waited = false;
  for (int attempt = 0; attempt < 5 && !waited; ++attempt) {
    const auto dir = ampt::test::make_temp_dir();
    Child child(long_run(dir, {"--mlp_hidden", "2048", "--batch_size", "1", "--mixed_precision",
                               "no", "--save_every", "1", "--keep_checkpoints", "3"}),
                dir);
    REQUIRE(wait_until([&] { return child.out().find("[CKPT] Saved step") != std::string::npos; }, 120));
    child.signal(SIGTERM);
    const int status = child.wait();
    INFO("attempt " << attempt << "\n" << child.out() << child.err());
    CHECK(status == 75);
    const auto stopped = ampt::test::lines_with(child.out(), "[CKPT] Stopped by SIGTERM after step ");
    REQUIRE(stopped.size() == 1);
    const int64_t last = std::stoll(stopped[0].substr(stopped[0].find("after step ") + 11));
    // The save in flight was finished and reported, then the final one written.
    const auto saves = ampt::test::lines_with(child.out(), "[CKPT] Saved step ");
    REQUIRE(saves.size() >= 2);
    CHECK_THAT(saves[saves.size() - 2], Catch::StartsWith(fmt::format("[CKPT] Saved step {} to", last - 1)));
    CHECK_THAT(saves.back(), Catch::StartsWith(fmt::format("[CKPT] Saved step {} to", last)));
    const auto name = [&dir](int64_t step) { return dir + "/" + ampt::checkpoint::checkpoint_file_name(step); };
    CHECK(ampt::checkpoint::find_latest(dir) == name(last));
    CHECK(ampt::checkpoint::load(name(last)).step == last);
    CHECK(ampt::checkpoint::load(name(last - 1)).step == last - 1);
    const auto final_save = ampt::test::lines_with(
        ampt::test::read_file(dir + "/metrics.jsonl"),
        fmt::format(R"({{"step": {}, "event": "checkpoint")", last));
    REQUIRE(final_save.size() == 1);
    waited = ampt::test::json_field(final_save[0], "wait_seconds") > 0.0;
  }
  CHECK(waited);
}

TEST_CASE("preemption: --preempt_signal chooses the extra signal", "[checkpoint][signals]") {
  const auto dir = ampt::test::make_temp_dir();
  Child child(long_run(dir, {"--preempt_signal", "SIGUSR2"}), dir);
  REQUIRE(wait_until([&] { return has_logged(dir); }, 60));
  child.signal(SIGUSR2);
  CHECK(child.wait() == 75);
  CHECK(ampt::checkpoint::find_latest(dir));
}

TEST_CASE("preemption: SIGINT saves and exits 130, a second SIGINT exits at once", "[checkpoint][signals]") {
  const auto dir = ampt::test::make_temp_dir();
  Child child(long_run(dir), dir);
  REQUIRE(wait_until([&] { return has_logged(dir); }, 60));
  child.signal(SIGINT);
  CHECK(child.wait() == 130);
  CHECK(ampt::checkpoint::find_latest(dir));

  // Steps of a few seconds each: the second SIGINT arrives while the first waits for the step.
  const auto slow_dir = ampt::test::make_temp_dir();
  Child slow(long_run(slow_dir, {"--batch_size", "4096", "--mlp_hidden", "2048",
                                 "--synthetic_samples", "8192", "--mixed_precision", "no",
                                 "--val_fraction", "0"}),
             slow_dir);
  REQUIRE(wait_until([&] { return has_logged(slow_dir); }, 120));
  slow.signal(SIGINT);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  slow.signal(SIGINT);
  CHECK(slow.wait() == 130);
  CHECK_THAT(slow.err(), Catch::Contains("second SIGINT: exiting without saving"));
}

TEST_CASE("SIGKILL during background writes always leaves loadable checkpoints", "[checkpoint][signals]") {
  const auto dir = ampt::test::make_temp_dir();
  // About 20 MB per checkpoint and a save after every step: most kills land inside a write.
  const auto argv = long_run(dir, {"--mlp_hidden", "1024", "--mlp_layers", "3", "--save_every", "1",
                                   "--keep_checkpoints", "2", "--resume", "auto"});
  std::mt19937 random(42);
  int loaded = 0;
  for (int round = 0; round < 6; ++round) {
    Child child(argv, dir);
    REQUIRE(wait_until([&] { return has_logged(dir); }, 60));
    std::this_thread::sleep_for(std::chrono::milliseconds(200 + random() % 600));
    child.signal(SIGKILL);
    CHECK(child.wait() == 128 + SIGKILL);
    const auto latest = ampt::checkpoint::find_latest(dir);
    if (!latest) continue;  // killed before the first save finished
    INFO("round " << round << ": " << *latest);
    CHECK_NOTHROW(ampt::checkpoint::load(*latest));
    // Every checkpoint under its final name is complete; at most the one write cut short is
    // left as a temporary (the next save removes it).
    int temporaries = 0;
    for (const auto& entry : fs::directory_iterator(dir)) {
      const auto name = entry.path().filename().string();
      if (name.find(".tmp-") != std::string::npos) ++temporaries;
      if (name.starts_with("ckpt-")) CHECK_NOTHROW(ampt::checkpoint::load(entry.path().string()));
    }
    CHECK(temporaries <= 1);
    ++loaded;
  }
  CHECK(loaded >= 4);
}

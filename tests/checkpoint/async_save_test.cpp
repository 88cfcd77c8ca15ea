// Checkpoints written in the background: training is the same with or without them, a save
// that fails is one warning and the next one tries again, the last one failing fails the run,
// and keep_checkpoints never deletes the newest complete checkpoint.
#include "ampt/checkpoint/checkpoint.h"
#include "ampt/train/trainer.h"

#include "support/json_field.h"
#include "support/process.h"
#include "support/same_state.h"
#include "support/run_recorder.h"
#include "support/stop_after.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <iterator>

namespace fs = std::filesystem;
using ampt::config::Config;
using ampt::test::entries;
using ampt::test::lines_with;
using ampt::test::read_file;
using ampt::test::run_ampt;

using ampt::test::Recorder;

namespace {

Config saving_run(const std::string& dir) {
  Config config;
  config.device = ampt::config::DeviceKind::cpu;
  config.mixed_precision = ampt::config::MixedPrecision::fp16;  // the scaler's state too
  config.synthetic_samples = 1024;
  config.mlp_hidden = 64;
  config.batch_size = 32;
  config.max_steps = 40;
  config.log_every = 1;
  config.output_dir = dir;
  return config;
}

std::vector<std::string> small_train(const std::string& dir, std::vector<std::string> extra) {
  std::vector<std::string> args{"train", "--output_dir", dir, "--device", "cpu", "--mlp_hidden",
                                "32", "--batch_size", "32", "--synthetic_samples", "512",
                                "--log_every", "5"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

}  // namespace

TEST_CASE("async saves: a run saving after every step equals one that never saves", "[checkpoint][async]") {
  const auto saving_dir = ampt::test::make_temp_dir();
  auto config = saving_run(saving_dir);
  config.save_every = 1;
  config.keep_checkpoints = 2;
  Recorder saving;
  const auto with_saves = ampt::train::run_training(config, {}, saving);

  const auto plain_dir = ampt::test::make_temp_dir();
  Recorder plain;
  const auto without = ampt::train::run_training(saving_run(plain_dir), {}, plain);

  CHECK(saving.losses == plain.losses);  // every step, bit for bit
  CHECK(with_saves.final_scale == without.final_scale);
  REQUIRE(saving.saves.size() == 40);
  for (size_t i = 0; i < saving.saves.size(); ++i) {
    INFO("save " << i);
    CHECK(saving.saves[i].step == static_cast<int64_t>(i) + 1);
    CHECK(saving.saves[i].error.empty());
  }
  CHECK(with_saves.checkpoints_saved == 40);
  CHECK(without.checkpoints_saved == 1);  // the final one
  ampt::test::check_same_state(saving_dir + "/ckpt-00000040.pt", plain_dir + "/ckpt-00000040.pt");
  CHECK(entries(saving_dir) == std::vector<std::string>{"ckpt-00000039.pt", "ckpt-00000040.pt", "latest"});
}

TEST_CASE("async saves: a checkpoint written while later steps train holds its own step's state", "[checkpoint][async]") {
  // Each file was written while the following steps updated the live tensors in place; resumed,
  // each must still reach exactly the end of the run that wrote it.
  const auto dir = ampt::test::make_temp_dir();
  auto config = saving_run(dir);
  config.save_every = 1;
  config.keep_checkpoints = 40;
  Recorder straight;
  ampt::train::run_training(config, {}, straight);
  for (const auto* step : {"00000013", "00000027", "00000039"}) {
    INFO("resumed from step " << step);
    auto resume = saving_run(ampt::test::make_temp_dir());
    resume.resume = dir + "/ckpt-" + step + ".pt";
    Recorder resumed;
    const auto summary = ampt::train::run_training(resume, {}, resumed);
    CHECK(summary.final_loss == straight.losses.back());
    ampt::test::check_same_state(dir + "/ckpt-00000040.pt", resume.output_dir + "/ckpt-00000040.pt");
  }
}

TEST_CASE("async saves: keep_checkpoints never deletes the checkpoint just written", "[checkpoint][async]") {
  const auto dir = ampt::test::make_temp_dir();
  auto config = saving_run(dir);
  config.max_steps = 30;
  config.save_every = 10;
  Recorder first;
  ampt::train::run_training(config, {}, first);
  REQUIRE(entries(dir) == std::vector<std::string>{"ckpt-00000010.pt", "ckpt-00000020.pt",
                                                   "ckpt-00000030.pt", "latest"});
  // Resumed from step 10 with keep 1: step 15 is older than 20 and 30, and is the one kept.
  config.resume = dir + "/ckpt-00000010.pt";
  config.max_steps = 15;
  config.save_every = 0;
  config.keep_checkpoints = 1;
  Recorder second;
  ampt::train::run_training(config, {}, second);
  CHECK(entries(dir) == std::vector<std::string>{"ckpt-00000015.pt", "latest"});
  CHECK(ampt::checkpoint::find_latest(dir) == dir + "/ckpt-00000015.pt");
  CHECK_NOTHROW(ampt::checkpoint::load(dir + "/ckpt-00000015.pt"));
}

TEST_CASE("save_final=false: a finished run saves no checkpoint at its end and says so, a "
          "preempted one still does",
          "[checkpoint][async]") {
  const auto dir = ampt::test::make_temp_dir();
  auto config = saving_run(dir);
  config.max_steps = 25;
  config.save_every = 10;
  config.save_final = false;
  Recorder run;
  const auto summary = ampt::train::run_training(config, {}, run);
  CHECK(summary.final_save_skipped);
  CHECK(summary.steps == 25);
  CHECK(summary.checkpoint == dir + "/ckpt-00000020.pt");  // save_every's last
  std::vector<std::string> checkpoints;
  std::ranges::copy_if(entries(dir), std::back_inserter(checkpoints),
                       [](const std::string& name) { return name.starts_with("ckpt-"); });
  CHECK(checkpoints == std::vector<std::string>{"ckpt-00000010.pt", "ckpt-00000020.pt"});

  // A stop request is not the end of training: the requeued job resumes from its save.
  const auto stopped_dir = ampt::test::make_temp_dir();
  auto stopped = saving_run(stopped_dir);
  stopped.save_final = false;
  Recorder stopped_run;
  const auto stop = ampt::train::run_training(stopped, ampt::test::stop_after(7), stopped_run);
  CHECK_FALSE(stop.final_save_skipped);
  CHECK(stop.checkpoint == stopped_dir + "/ckpt-00000007.pt");

  // The summary line, and the flag's spelling.
  const auto cli_dir = ampt::test::make_temp_dir();
  const auto r = run_ampt(small_train(cli_dir, {"--max_steps", "5", "--save_final=false"}));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("Checkpoint:       none at the end (--save_final=false)"));
  CHECK_THAT(read_file(cli_dir + "/summary.json"), Catch::Contains("\"final_save_skipped\": true"));
  CHECK(std::ranges::none_of(entries(cli_dir), [](const std::string& name) {
    return name.starts_with("ckpt-");
  }));
}

TEST_CASE("async saves: a failed save is one warning, training goes on and the next save succeeds", "[checkpoint][async][errors]") {
  // A directory where step 10's file goes makes its rename fail (EISDIR) even for root.
  const auto dir = ampt::test::make_temp_dir();
  ampt::test::write_file(dir + "/ckpt-00000010.pt/keep", "x");
  const auto r = run_ampt(small_train(dir, {"--max_steps", "20", "--save_every", "5"}));
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.err == "ampt: warning: checkpoint of step 10 not saved: cannot rename the complete "
                 "temporary file into '" + dir + "/ckpt-00000010.pt': Is a directory (EISDIR); "
                 "training goes on, the next save tries again\n");
  for (const auto* step : {"5", "15", "20"}) CHECK_THAT(r.out, Catch::Contains(fmt::format("[CKPT] Saved step {} to", step)));
  CHECK(ampt::checkpoint::find_latest(dir) == dir + "/ckpt-00000020.pt");
  CHECK(ampt::checkpoint::load(dir + "/ckpt-00000015.pt").step == 15);
  const auto metrics = read_file(dir + "/metrics.jsonl");
  const auto failed = lines_with(metrics, "\"event\": \"checkpoint\", \"path\": \"" + dir + "/ckpt-00000010.pt\"");
  REQUIRE(failed.size() == 1);
  CHECK_THAT(failed[0], Catch::Contains(R"("error": "cannot rename)"));
  // No temporary is left behind.
  for (const auto& name : entries(dir)) CHECK(name.find(".tmp-") == std::string::npos);
}

TEST_CASE("async saves: the last save failing fails the run, the previous checkpoint stays", "[checkpoint][async][errors]") {
  const auto dir = ampt::test::make_temp_dir();
  ampt::test::write_file(dir + "/ckpt-00000020.pt/keep", "x");
  const auto r = run_ampt(small_train(dir, {"--max_steps", "20", "--save_every", "15"}));
  INFO(r.out << r.err);
  CHECK(r.exit_code == 1);
  CHECK(r.err == "ampt: error: checkpoint of step 20 not saved: cannot rename the complete "
                 "temporary file into '" + dir + "/ckpt-00000020.pt': Is a directory (EISDIR)\n");
  CHECK(ampt::checkpoint::find_latest(dir) == dir + "/ckpt-00000015.pt");
  CHECK(ampt::checkpoint::load(dir + "/ckpt-00000015.pt").step == 15);
}

TEST_CASE("async saves: a write cut short (file size limit, EFBIG) leaves the previous checkpoint", "[checkpoint][async][errors]") {
  const auto dir = ampt::test::make_temp_dir();
  const auto first = run_ampt(small_train(dir, {"--max_steps", "10", "--mlp_hidden", "512"}));
  REQUIRE(first.exit_code == 0);
  const auto good = ampt::checkpoint::find_latest(dir);
  REQUIRE(good);
  // RLIMIT_FSIZE of 1 MiB: the ~9 MB checkpoint's write fails partway with EFBIG (SIGXFSZ is
  // ignored, as it is inherited across exec), while metrics and logs stay small.
  std::string command = "trap '' XFSZ; ulimit -f 2048; exec " AMPT_BINARY;
  for (const auto& arg : small_train(dir, {"--max_steps", "20", "--mlp_hidden", "512", "--resume",
                                           "auto", "--save_every", "5"})) {
    command += " '" + arg + "'";
  }
  const auto r = ampt::test::run_process({"/bin/sh", "-c", command});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 1);
  const auto warnings = lines_with(r.err, "ampt: warning: checkpoint of step 15 not saved: cannot write '" + dir + "/ckpt-00000015.pt': File too large (EFBIG)");
  CHECK(warnings.size() == 1);
  CHECK_THAT(r.err, Catch::EndsWith("ampt: error: checkpoint of step 20 not saved: cannot write '" + dir +
                                    "/ckpt-00000020.pt': File too large (EFBIG)\n"));
  CHECK(ampt::checkpoint::find_latest(dir) == *good);
  CHECK(ampt::checkpoint::load(*good).step == 10);
  for (const auto& name : entries(dir)) CHECK(name.find(".tmp-") == std::string::npos);
}

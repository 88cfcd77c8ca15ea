// Exact resume: a run stopped at step 50 and resumed ends bit-identical to one never stopped.
#include "ampt/checkpoint/checkpoint.h"
#include "ampt/train/trainer.h"

#include "support/process.h"
#include "support/stop_after.h"
#include "support/same_state.h"
#include "support/run_recorder.h"

#include <catch2/catch.hpp>

#include <csignal>
#include <filesystem>

using ampt::test::Recorder;

namespace {

using ampt::config::Config;
using ampt::config::MixedPrecision;

Config small_run(MixedPrecision precision, const std::string& dir) {
  Config config;
  config.device = ampt::config::DeviceKind::cpu;
  config.mixed_precision = precision;
  config.synthetic_samples = 1024;
  config.mlp_hidden = 64;
  config.batch_size = 32;  // 32 batches per epoch: the stop at 50 falls mid-epoch
  config.max_steps = 100;
  config.log_every = 25;
  config.output_dir = dir;
  return config;
}

}  // namespace

TEST_CASE("resume: stopped at 50 and resumed equals never stopped, in each precision", "[checkpoint][resume]") {
  for (auto precision : {MixedPrecision::no, MixedPrecision::bf16, MixedPrecision::fp16}) {
    const auto straight_dir = ampt::test::make_temp_dir();
    const auto stopped_dir = ampt::test::make_temp_dir();
    Recorder straight;
    const auto reference =
        ampt::train::run_training(small_run(precision, straight_dir), {}, straight);

    Recorder first;
    const auto stopped =
        ampt::train::run_training(small_run(precision, stopped_dir), ampt::test::stop_after(50), first);
    CHECK(stopped.stop_signal == SIGTERM);
    CHECK(stopped.steps == 50);
    CHECK(stopped.checkpoint == stopped_dir + "/ckpt-00000050.pt");

    auto config = small_run(precision, stopped_dir);
    config.resume = "auto";
    Recorder second;
    const auto resumed = ampt::train::run_training(config, {}, second);
    INFO("precision " << resumed.precision);
    CHECK(second.info.start_step == 50);
    CHECK_THAT(second.info.resume_note, Catch::StartsWith("Resumed from " + stopped_dir));
    CHECK(resumed.steps == 100);
    CHECK(resumed.steps_this_run == 50);
    // Equality, not closeness: same losses, weights and optimizer state.
    CHECK(resumed.final_loss == reference.final_loss);
    CHECK(resumed.initial_loss == reference.initial_loss);
    CHECK(resumed.final_scale == reference.final_scale);
    CHECK(second.steps.back().loss == straight.steps.back().loss);
    ampt::test::check_same_state(straight_dir + "/ckpt-00000100.pt", stopped_dir + "/ckpt-00000100.pt");
  }
}

TEST_CASE("resume: checkpoints do not depend on the precision they were trained in", "[checkpoint][resume]") {
  const auto dir = ampt::test::make_temp_dir();
  auto config = small_run(MixedPrecision::fp16, dir);
  config.max_steps = 20;
  config.grad_scaler_init = 1024.0;
  Recorder fp16_run;
  ampt::train::run_training(config, {}, fp16_run);

  // fp16 → bf16: the scaler state is ignored, with a note.
  config.mixed_precision = MixedPrecision::bf16;
  config.max_steps = 30;
  config.resume = dir + "/ckpt-00000020.pt";
  Recorder bf16_run;
  const auto bf16 = ampt::train::run_training(config, {}, bf16_run);
  CHECK(bf16.steps == 30);
  CHECK_THAT(bf16_run.info.resume_note, Catch::Contains("loss scaler state ignored"));

  // bf16 → fp16: no scaler state saved, so the scaler starts at init_scale.
  config.mixed_precision = MixedPrecision::fp16;
  config.max_steps = 40;
  config.resume = "auto";
  Recorder fp16_again;
  ampt::train::run_training(config, {}, fp16_again);
  CHECK_THAT(fp16_again.info.resume_note, Catch::Contains("starts at init_scale 1024"));

  // fp16 → fp16 restores the saved scale and tracker.
  config.max_steps = 45;
  Recorder fp16_third;
  ampt::train::run_training(config, {}, fp16_third);
  CHECK_THAT(fp16_third.info.resume_note, Catch::Contains("loss scaler (scale 1024, growth tracker 10)"));

  // fp16 → fp32 trains on from the same weights.
  config.mixed_precision = MixedPrecision::no;
  config.max_steps = 50;
  Recorder fp32_run;
  const auto fp32 = ampt::train::run_training(config, {}, fp32_run);
  CHECK(fp32_run.info.start_step == 45);
  CHECK(fp32.final_loss < fp16_run.steps.front().loss);
}

TEST_CASE("resume auto with no checkpoint starts fresh and says so", "[checkpoint][resume]") {
  const auto dir = ampt::test::make_temp_dir();
  auto config = small_run(MixedPrecision::bf16, dir);
  config.max_steps = 5;
  config.resume = "auto";
  Recorder run;
  const auto summary = ampt::train::run_training(config, {}, run);
  CHECK(run.info.start_step == 0);
  CHECK_THAT(run.info.resume_note, Catch::Contains("no checkpoint in " + dir + ": starting fresh"));
  CHECK(summary.steps == 5);
}

TEST_CASE("checkpoints: saved every N steps, the newest K kept, latest points to the last", "[checkpoint]") {
  const auto dir = ampt::test::make_temp_dir();
  auto config = small_run(MixedPrecision::bf16, dir);
  config.max_steps = 50;
  config.save_every = 10;
  config.keep_checkpoints = 2;
  Recorder run;
  ampt::train::RunContext context;
  context.config_text = "batch_size = 32 (flag --batch_size)\n";
  ampt::train::run_training(config, context, run);
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{"ckpt-00000040.pt", "ckpt-00000050.pt", "latest"});
  CHECK(ampt::checkpoint::find_latest(dir) == dir + "/ckpt-00000050.pt");
  const auto saved = ampt::checkpoint::load(dir + "/ckpt-00000050.pt");
  CHECK(saved.step == 50);
  CHECK(saved.optimizer_kind == "adamw");
  CHECK(saved.config == context.config_text);
  CHECK(saved.model.front().second.scalar_type() == torch::kFloat32);
}

TEST_CASE("resume: a checkpoint at the last step trains nothing and says so", "[checkpoint][resume]") {
  const auto dir = ampt::test::make_temp_dir();
  auto config = small_run(MixedPrecision::bf16, dir);
  config.max_steps = 10;
  Recorder first;
  ampt::train::run_training(config, {}, first);
  config.resume = "auto";
  Recorder again;
  const auto summary = ampt::train::run_training(config, {}, again);
  CHECK(summary.steps == 10);
  CHECK(summary.steps_this_run == 0);
  CHECK(again.steps.empty());
  CHECK_THAT(again.info.resume_note, Catch::EndsWith("nothing to train, raise --max_steps or --epochs to train on"));
  CHECK(ampt::checkpoint::find_latest(dir) == dir + "/ckpt-00000010.pt");
}

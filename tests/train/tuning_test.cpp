// Channels-last: the CNN's weights really go NHWC, the model computes what the NCHW one does, and
// its checkpoints resume exactly and load into an NCHW run.
#include "ampt/models/registry.h"
#include "ampt/train/trainer.h"
#include "ampt/train/tuning.h"

#include "support/process.h"
#include "support/stop_after.h"
#include "support/same_state.h"
#include "support/run_recorder.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <csignal>
#include <filesystem>

using ampt::test::Recorder;

namespace {

using ampt::config::Config;

Config cnn_run(bool channels_last, const std::string& dir) {
  Config config;
  config.device = ampt::config::DeviceKind::cpu;
  config.model = "cnn";
  config.cnn_channels = 8;
  config.synthetic_samples = 256;
  config.batch_size = 16;
  config.max_steps = 12;
  config.log_every = 1;
  config.val_fraction = 0.0;
  config.channels_last = channels_last;
  config.output_dir = dir;
  // fp32, whatever this CPU's auto would pick: the two layouts' convolutions sum in different
  // orders, which fp32's rounding keeps to about 1e-6 of the loss (bf16's to about 1e-3, as
  // much as a step changes it: a resume from the wrong step would pass).
  config.mixed_precision = ampt::config::MixedPrecision::no;
  return config;
}

}  // namespace

TEST_CASE("channels-last: conv weights NHWC, the same outputs and gradients as NCHW", "[train][tuning]") {
  Config config = cnn_run(true, "");
  const ampt::data::DataSpec spec{ampt::data::Task::classification, {3, 16, 16}, 10};
  torch::manual_seed(3);
  auto nchw = ampt::models::make_model(config, spec);
  torch::manual_seed(3);
  auto nhwc = ampt::models::make_model(config, spec);
  ampt::train::to_channels_last(nhwc);

  int convs = 0;
  for (const auto& p : nhwc.module->parameters()) {
    if (p.dim() != 4) continue;
    ++convs;
    CHECK(p.is_contiguous(torch::MemoryFormat::ChannelsLast));
    if (p.size(2) > 1) CHECK_FALSE(p.is_contiguous());  // 1x1 kernels are both at once
  }
  CHECK(convs >= 7);  // stem, two per block, two shortcuts

  const auto x = torch::randn({4, 3, 16, 16});
  const auto out_nchw = nchw.forward(x);
  const auto out_nhwc = nhwc.forward(x);
  CHECK(torch::allclose(out_nhwc, out_nchw, 1e-4, 1e-5));
  out_nchw.square().sum().backward();
  out_nhwc.square().sum().backward();
  const auto a = nchw.module->parameters();
  const auto b = nhwc.module->parameters();
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("parameter " << i << " " << a[i].sizes());
    // The gradient keeps the weight's layout (AccumulateGrad's contract): the fused optimizer
    // walks weight, gradient and moments as one flat array.
    if (b[i].dim() == 4) CHECK(b[i].grad().is_contiguous(torch::MemoryFormat::ChannelsLast));
    CHECK(torch::allclose(b[i].grad(), a[i].grad(), 1e-3, 1e-4));
  }
}

TEST_CASE("channels-last: on by default on a CPU, trains as NCHW does", "[train][tuning]") {
  Recorder nhwc;
  Recorder nchw;
  ampt::train::run_training(cnn_run(true, ampt::test::make_temp_dir()), {}, nhwc);
  ampt::train::run_training(cnn_run(false, ampt::test::make_temp_dir()), {}, nchw);
  CHECK(Config{}.channels_last);
  CHECK(std::count(nhwc.info.speed_notes.begin(), nhwc.info.speed_notes.end(),
                   "Channels-last: the CNN's weights and activations in NHWC") == 1);
  CHECK(nchw.info.speed_notes.empty());
  REQUIRE(nhwc.losses.size() == 12);
  REQUIRE(nchw.losses.size() == 12);
  // Different convolution kernels round differently; twelve steps keep that far below 1e-3.
  for (size_t i = 0; i < nhwc.losses.size(); ++i) {
    INFO("step " << i + 1);
    CHECK(nhwc.losses[i] == Approx(nchw.losses[i]).epsilon(1e-3));
  }
}

TEST_CASE("channels-last: a checkpoint resumes exactly, and loads into an NCHW run", "[train][tuning][resume]") {
  const auto straight_dir = ampt::test::make_temp_dir();
  Recorder straight;
  ampt::train::run_training(cnn_run(true, straight_dir), {}, straight);

  const auto stopped_dir = ampt::test::make_temp_dir();
  Recorder first;
  ampt::train::run_training(cnn_run(true, stopped_dir), ampt::test::stop_after(6), first);
  const auto copy_dir = ampt::test::make_temp_dir();
  std::filesystem::copy(stopped_dir, copy_dir, std::filesystem::copy_options::recursive);

  auto config = cnn_run(true, stopped_dir);
  config.resume = "auto";
  Recorder resumed;
  ampt::train::run_training(config, {}, resumed);
  REQUIRE(resumed.losses.size() == 6);
  CHECK(resumed.losses.back() == straight.losses.back());
  ampt::test::check_same_state(straight_dir + "/ckpt-00000012.pt", stopped_dir + "/ckpt-00000012.pt");

  // The file holds logical (NCHW-ordered) tensors: an NCHW run picks up where the NHWC one stopped.
  auto plain = cnn_run(false, copy_dir);
  plain.resume = "auto";
  Recorder crossed;
  ampt::train::run_training(plain, {}, crossed);
  REQUIRE(crossed.losses.size() == 6);
  CHECK(crossed.losses.front() == Approx(straight.losses[6]).epsilon(1e-4));
  CHECK(crossed.losses.back() == Approx(straight.losses.back()).epsilon(1e-3));
}

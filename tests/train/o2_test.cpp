// O2 against O1 on real runs (loss agreement, memory), O2 checkpoints, and precision schedules
// switching mid-run and resuming in the middle.
#include "ampt/checkpoint/checkpoint.h"
#include "ampt/precision/precision_islands.h"
#include "ampt/models/registry.h"
#include "ampt/precision/autocast_guard.h"
#include "ampt/precision/master_weights.h"
#include "ampt/train/optimizer.h"
#include "ampt/train/trainer.h"

#include "support/process.h"
#include "support/stop_after.h"
#include "support/run_recorder.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/nn/functional/loss.h>

#include <malloc.h>

#include <cmath>
#include <csignal>

using ampt::test::Recorder;

namespace {

using ampt::config::Config;
using ampt::config::MixedPrecision;
using ampt::config::OptLevel;

Config run_of(const std::string& model, MixedPrecision precision, OptLevel level, int64_t steps) {
  Config config;
  config.output_dir = ampt::test::make_temp_dir();
  config.device = ampt::config::DeviceKind::cpu;
  config.model = model;
  config.mixed_precision = precision;
  config.amp_opt_level = level;
  config.synthetic_samples = 2048;
  config.batch_size = 32;
  config.max_steps = steps;
  config.log_every = 10;
  config.eval_batches = 4;
  return config;
}

}  // namespace

// The tolerance: O2 differs from O1 by rounding only (half weights and gradients, a half
// residual stream), which over these runs moves the final loss by at most 2% of the initial one.
TEST_CASE("O2 reaches O1's final loss on mlp and gpt-tiny in bf16 and on mlp in fp16", "[train][o2]") {
  struct Case {
    std::string model;
    MixedPrecision precision;
    int64_t steps;
  };
  for (const auto& c : {Case{"mlp", MixedPrecision::bf16, 150}, Case{"gpt-tiny", MixedPrecision::bf16, 40},
                        Case{"mlp", MixedPrecision::fp16, 60}}) {
    Recorder o1_log;
    Recorder o2_log;
    const auto o1 = ampt::train::run_training(run_of(c.model, c.precision, OptLevel::O1, c.steps), {}, o1_log);
    const auto o2 = ampt::train::run_training(run_of(c.model, c.precision, OptLevel::O2, c.steps), {}, o2_log);
    INFO(c.model << " " << o2.precision << ": O1 " << o1.initial_loss << " -> " << o1.final_loss
                 << ", O2 " << o2.initial_loss << " -> " << o2.final_loss);
    CHECK(o2_log.info.opt_level == "O2");
    CHECK(o2.initial_loss == Approx(o1.initial_loss).margin(0.01));
    CHECK(o2.final_loss < 0.8 * o2.initial_loss);  // it learns
    CHECK(std::abs(o2.final_loss - o1.final_loss) <= 0.02 * o1.initial_loss);
    CHECK(std::abs(o2.final_val_loss - o1.final_val_loss) <= 0.02 * o1.initial_loss);
    CHECK(o2.skipped_steps == 0);
    CHECK(o2.loss_scaling == (c.precision == MixedPrecision::fp16));
  }
}

TEST_CASE("O2 checkpoints hold the fp32 masters and a stopped O2 run resumes exactly", "[train][o2][checkpoint]") {
  auto config = run_of("gpt-tiny", MixedPrecision::bf16, OptLevel::O2, 40);
  config.keep_fp32_modules = "wte";
  config.batch_size = 8;
  Recorder straight_log;
  const auto straight = ampt::train::run_training(config, {}, straight_log);

  auto stopped_config = config;
  stopped_config.output_dir = ampt::test::make_temp_dir();
  Recorder first;
  const auto stopped = ampt::train::run_training(stopped_config, ampt::test::stop_after(20), first);
  REQUIRE(stopped.steps == 20);
  const auto middle = ampt::checkpoint::load(stopped.checkpoint);
  for (const auto& [name, tensor] : middle.model) {
    INFO(name);
    CHECK(tensor.scalar_type() == torch::kFloat);
  }
  stopped_config.resume = "auto";
  Recorder second;
  const auto resumed = ampt::train::run_training(stopped_config, {}, second);
  CHECK(resumed.final_loss == straight.final_loss);
  const auto a = ampt::checkpoint::load(straight.checkpoint);
  const auto b = ampt::checkpoint::load(resumed.checkpoint);
  REQUIRE(a.model.size() == b.model.size());
  for (size_t i = 0; i < a.model.size(); ++i) {
    INFO(a.model[i].first);
    CHECK(torch::equal(a.model[i].second, b.model[i].second));
  }
  // The masters are not bf16-rounded: O2 keeps fp32 precision in what it saves.
  bool any_unrounded = false;
  for (const auto& [name, tensor] : a.model) {
    any_unrounded |= !torch::equal(tensor, tensor.to(torch::kBFloat16).to(torch::kFloat));
  }
  CHECK(any_unrounded);
}

TEST_CASE("O2 and fp16 runs report fp32 modules and this model's risky ops at startup", "[train][o2][compat]") {
  auto config = run_of("gpt-tiny", MixedPrecision::bf16, OptLevel::O2, 1);
  config.keep_fp32_modules = "wte";
  Recorder gpt;
  ampt::train::run_training(config, {}, gpt);
  const auto& report = gpt.info.compat_report;
  REQUIRE(report.size() >= 3);
  CHECK_THAT(report[0], Catch::Contains("fp32 modules: 6 of "));  // wte and 5 LayerNorms
  CHECK_THAT(report[0], Catch::Contains("wte (keep_fp32_modules pattern 'wte')"));
  CHECK_THAT(report[0], Catch::Contains("h.0.ln_1, h.0.ln_2, h.1.ln_1, h.1.ln_2 and 1 more (norm layer)"));
  const auto joined = fmt::format("{}", fmt::join(report, "\n"));
  CHECK_THAT(joined, Catch::Contains("attention softmax in bf16 (h.0.attn, h.1.attn)"));
  CHECK_THAT(joined, Catch::Contains("residual stream in bf16: 4 attention and MLP branches"));
  CHECK_THAT(joined, Catch::Contains("cross-entropy over 256 logits"));

  // Any transformer family, read from its layer inventory: a Llama's attention and residual
  // stream, named as its modules are.
  Recorder llama;
  ampt::train::run_training(run_of("llama", MixedPrecision::bf16, OptLevel::O2, 1), {}, llama);
  const auto llama_joined = fmt::format("{}", fmt::join(llama.info.compat_report, "\n"));
  CHECK_THAT(llama_joined, Catch::Contains("attention softmax in bf16 (layers.0.self_attn, layers.1.self_attn)"));
  CHECK_THAT(llama_joined, Catch::Contains("residual stream in bf16: 4 attention and MLP branches"));
  CHECK_THAT(llama_joined, Catch::Contains("cross-entropy over 256 logits"));

  auto cnn_config = run_of("cnn", MixedPrecision::fp16, OptLevel::O1, 1);
  cnn_config.synthetic_samples = 512;
  cnn_config.batch_size = 16;
  cnn_config.cnn_channels = 4;
  Recorder cnn;
  ampt::train::run_training(cnn_config, {}, cnn);
  const auto cnn_joined = fmt::format("{}", fmt::join(cnn.info.compat_report, "\n"));
  CHECK_THAT(cnn_joined, Catch::Contains("fp32 modules: none"));
  CHECK_THAT(cnn_joined, Catch::Contains("risky: BatchNorm statistics of stem_bn"));
  CHECK_THAT(cnn_joined, Catch::Contains("global average pool"));
  CHECK_THAT(cnn_joined, Catch::Contains("fp16: activations past 65504"));

  Recorder plain;
  ampt::train::run_training(run_of("mlp", MixedPrecision::bf16, OptLevel::O1, 1), {}, plain);
  CHECK(plain.info.compat_report.empty());  // bf16 O1 keeps fp32 weights: nothing to report
}

// Memory: per parameter, O1 holds fp32 weights and gradients plus the AdamW moments (16 bytes);
// O2 holds half weights, fp32 masters and the moments, and its half gradients only between
// backward and the optimizer step. Measured here as the heap in use (glibc's count, which
// LibTorch's CPU allocator draws from) at the end of a forward pass, after a few steps, when
// the activations of the pass and the autocast weight casts are alive too.
TEST_CASE("O2 holds less memory than O1 at the end of the forward pass", "[train][o2][memory]") {
  const auto held_bytes = [](OptLevel level, int64_t batch) {
    const auto heap = [] {
      const auto info = mallinfo2();
      return static_cast<int64_t>(info.uordblks + info.hblkhd);
    };
    const int64_t before = heap();
    int64_t held = 0;
    {
      Config config;
      config.model = "gpt-tiny";
      torch::manual_seed(5);
      auto model = ampt::models::make_model(config, {ampt::data::Task::language_model, {64}, 256});
      const auto islands = ampt::precision::select_islands(*model.module, {}, level == OptLevel::O2);
      ampt::precision::MasterWeights masters(*model.module, level == OptLevel::O2,
                                             [&](const std::string& n) { return islands.owns_parameter(n); });
      masters.set_dtype(level == OptLevel::O2 ? torch::kBFloat16 : torch::kFloat);
      auto optimizer = ampt::train::make_optimizer(config, masters.masters());
      const auto tokens = torch::randint(256, {batch, 65});
      const auto found_inf = torch::zeros({});
      for (int step = 0; step < 3; ++step) {
        ampt::precision::AutocastGuard autocast(torch::kCPU, torch::kBFloat16, true);
        ampt::precision::IslandScope scope(&islands);
        const auto loss = torch::nn::functional::cross_entropy(
            model.forward(tokens.narrow(1, 0, 64)).flatten(0, -2), tokens.narrow(1, 1, 64).flatten());
        if (step == 2) {
          held = heap() - before;
          break;
        }
        loss.backward();
        masters.master_grads();
        optimizer->step(1e-3, found_inf);
        masters.refresh_model();
        for (auto& p : model.module->parameters()) {
          if (p.grad().defined()) p.mutable_grad().zero_();
        }
      }
    }
    return held;
  };
  // One pass of each first: LibTorch allocates lazily initialised state (kernel caches and
  // scratch buffers per shape) on first use, which must not be charged to whichever level runs
  // first.
  for (const int64_t batch : {32, 4}) {
    held_bytes(OptLevel::O1, batch);
    held_bytes(OptLevel::O2, batch);
    const auto o1 = held_bytes(OptLevel::O1, batch);
    const auto o2 = held_bytes(OptLevel::O2, batch);
    INFO("batch " << batch << ": O1 " << o1 << " bytes, O2 " << o2 << " bytes");
    CHECK(o2 < 0.92 * o1);
  }
}

TEST_CASE("precision schedule: fp32 then bf16 then fp16 in one run, the scaler appears with fp16", "[train][schedule]") {
  auto config = run_of("mlp", MixedPrecision::no, OptLevel::O2, 90);
  config.precision_schedule = "fp32:30,bf16:60,fp16";
  config.grad_scaler_init = 1024.0;
  config.log_every = 1;
  Recorder log;
  const auto summary = ampt::train::run_training(config, {}, log);
  REQUIRE(log.switches.size() == 2);
  CHECK(log.switches[0].step == 30);
  CHECK(log.switches[0].from == "FP32");
  CHECK(log.switches[0].to == "BF16");
  CHECK_FALSE(log.switches[0].loss_scaling);
  CHECK(log.switches[1].step == 60);
  CHECK(log.switches[1].to == "FP16");
  CHECK(log.switches[1].loss_scaling);
  CHECK(log.info.precision_schedule == std::vector<std::string>{"fp32:30", "bf16:60", "fp16"});
  CHECK(summary.precision == "FP32 → BF16 → FP16");
  for (const auto& step : log.steps) {
    INFO("step " << step.step);
    CHECK(std::isfinite(step.loss));
    CHECK(step.loss_scaling == (step.step > 60));
    if (step.step == 61) CHECK(step.scale == 1024.0);  // a fresh scaler at init_scale
  }
  CHECK(summary.skipped_steps == 0);
  CHECK(summary.final_loss < 0.6 * summary.initial_loss);
}

TEST_CASE("precision schedule: a run resumed in the middle picks the right stage and ends as if never stopped", "[train][schedule][checkpoint]") {
  auto config = run_of("mlp", MixedPrecision::no, OptLevel::O2, 60);
  config.precision_schedule = "fp16:20,bf16:40,fp32";
  config.grad_scaler_init = 256.0;
  Recorder straight_log;
  const auto straight = ampt::train::run_training(config, {}, straight_log);
  CHECK(straight_log.switches.size() == 2);

  config.output_dir = ampt::test::make_temp_dir();
  Recorder first;
  ampt::train::run_training(config, ampt::test::stop_after(30), first);
  config.resume = "auto";
  Recorder second;
  const auto resumed = ampt::train::run_training(config, {}, second);
  CHECK(second.info.precision_stage == 2);
  CHECK_THAT(second.info.resume_note, Catch::EndsWith("precision stage 2 of 3 (bf16:40)"));
  REQUIRE(second.switches.size() == 1);
  CHECK(second.switches[0].step == 40);
  CHECK(second.switches[0].from == "BF16");
  CHECK(resumed.final_loss == straight.final_loss);
  const auto a = ampt::checkpoint::load(straight.checkpoint);
  const auto b = ampt::checkpoint::load(resumed.checkpoint);
  for (size_t i = 0; i < a.model.size(); ++i) CHECK(torch::equal(a.model[i].second, b.model[i].second));
}

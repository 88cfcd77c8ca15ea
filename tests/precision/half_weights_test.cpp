// O1's half working weights (precision/half_weights.h) against autocast's casts on real runs:
// the copies give autocast's losses bit for bit, through accumulation, a resume, a precision
// schedule with an fp32 island, GradScaler's skips and LoRA, with autocast's half weight
// gradients and with the fp32 ones (which a CPU forms from the half GEMM's product, as autocast
// does: the same values; a GPU's fp32-output GEMM differs by the half rounding, tested with the
// kernels). The copies are the weights the matmuls read, made at the first forward and written by
// every optimizer step.
#include "ampt/kernels/weight_copies.h"
#include "ampt/train/trainer.h"

#include "support/process.h"
#include "support/stop_after.h"

#include <ATen/autocast_mode.h>
#include <catch2/catch.hpp>
#include <torch/torch.h>


namespace {

using ampt::config::Config;
using ampt::config::MixedPrecision;

struct Losses final : ampt::log::Observer {
  std::vector<double> steps;
  int64_t skipped = 0;
  void on_step(const ampt::log::StepReport& r) override { steps.push_back(r.loss); }
  void on_end(const ampt::log::RunSummary& s) override { skipped = s.skipped_steps; }
};

// gpt-tiny, 30 logged steps of 2 micro-batches each (accumulation: the fp32 gradient of the
// second is added in its GEMM), in `precision` under O1.
Config gpt_run(MixedPrecision precision) {
  Config config;
  config.output_dir = ampt::test::make_temp_dir();
  config.device = ampt::config::DeviceKind::cpu;
  config.model = "gpt-tiny";
  config.mixed_precision = precision;
  config.synthetic_samples = 4096;
  config.batch_size = 4;
  config.grad_accum_steps = 2;
  config.max_steps = 30;
  config.log_every = 1;
  config.lr = 3e-3;
  config.val_fraction = 0.0;
  return config;
}

enum class Path { casts, copies, fp32_grads };

Losses train(Config config, Path path) {
  config.half_weights = path != Path::casts;
  config.fp32_weight_grads = path == Path::fp32_grads;
  Losses losses;
  ampt::train::run_training(config, {}, losses);
  return losses;
}

void check_equal(const Losses& a, const Losses& b) {
  REQUIRE(a.steps.size() == b.steps.size());
  for (size_t i = 0; i < a.steps.size(); ++i) {
    INFO("step " << i + 1);
    CHECK(a.steps[i] == b.steps[i]);
  }
}

// The three paths of `config`, one loss path.
void check_paths(const Config& config) {
  const auto casts = train(config, Path::casts);
  const auto copies = train(config, Path::copies);
  const auto fp32 = train(config, Path::fp32_grads);
  REQUIRE(casts.steps.size() == static_cast<size_t>(config.max_steps));
  check_equal(copies, casts);
  check_equal(fp32, casts);
  // The run learns (LoRA's adapters slowest, by 1.4% over these steps): a path that lost its
  // gradients would not.
  CHECK(fp32.steps.back() < 0.99 * fp32.steps.front());
}

}  // namespace

TEST_CASE("half weights: the O1 copies give autocast's losses bit for bit, with half and with "
          "fp32 weight gradients, in bf16 and fp16",
          "[precision][half_weights]") {
  check_paths(gpt_run(MixedPrecision::bf16));
  check_paths(gpt_run(MixedPrecision::fp16));
}

TEST_CASE("half weights: through a precision schedule and an fp32 island, copies are made in "
          "each half stage and none in fp32",
          "[precision][half_weights]") {
  auto config = gpt_run(MixedPrecision::fp16);
  config.precision_schedule = "bf16:8,fp32:16,fp16";
  config.keep_fp32_modules = "h.1.mlp";
  check_paths(config);
}

TEST_CASE("half weights: GradScaler's skipped steps leave the copies as they were",
          "[precision][half_weights]") {
  auto config = gpt_run(MixedPrecision::fp16);
  // fp16 overflows at this scale in every step: nothing may change, copies included, so each
  // path sees the weights it started with.
  config.grad_scaler_init = 1e30;
  const auto casts = train(config, Path::casts);
  REQUIRE(casts.skipped == config.max_steps);
  check_equal(train(config, Path::copies), casts);
  check_equal(train(config, Path::fp32_grads), casts);
  // Overflowing for the first steps, then growing into overflow every 5 clean ones.
  config.grad_scaler_init = 4194304;
  config.grad_scaler_growth_interval = 5;
  REQUIRE(train(config, Path::casts).skipped > 3);
  check_paths(config);
}

TEST_CASE("half weights: LoRA's adapters have copies, its frozen base needs none",
          "[precision][half_weights][lora]") {
  auto config = gpt_run(MixedPrecision::bf16);
  config.lora_rank = 4;
  config.lr = 1e-2;
  check_paths(config);
}

TEST_CASE("half weights: a stopped run resumes onto the same losses, its copies made again from "
          "the saved fp32 weights",
          "[precision][half_weights][checkpoint]") {
  auto config = gpt_run(MixedPrecision::bf16);
  const auto straight = train(config, Path::fp32_grads);
  auto stopped = config;
  stopped.output_dir = ampt::test::make_temp_dir();
  stopped.half_weights = true;
  stopped.fp32_weight_grads = true;
  Losses first, second;
  ampt::train::run_training(stopped, ampt::test::stop_after(13), first);
  stopped.resume = "auto";
  ampt::train::run_training(stopped, {}, second);
  first.steps.insert(first.steps.end(), second.steps.begin(), second.steps.end());
  check_equal(first, straight);
}

TEST_CASE("half weights: a copy is made by the first matmul that reads it under autocast, and "
          "read in its dtype only",
          "[precision][half_weights]") {
  namespace k = ampt::kernels;
  auto w = torch::randn({8, 4}, torch::requires_grad());
  k::allow_weight_copy(w, torch::kBFloat16, true);
  CHECK_FALSE(k::made_weight_copy(w).defined());
  CHECK_FALSE(k::weight_copy(w).copy.defined());  // autocast is off
  {
    at::autocast::set_autocast_enabled(c10::kCPU, true);
    at::autocast::set_autocast_dtype(c10::kCPU, torch::kBFloat16);
    const auto copy = k::weight_copy(w);
    REQUIRE(copy.copy.defined());
    CHECK(copy.fp32_grad);
    CHECK(torch::equal(copy.copy, w.to(torch::kBFloat16)));
    CHECK(k::made_weight_copy(w).data_ptr() == copy.copy.data_ptr());
    // A view of the weight reads the same view of the copy.
    const auto rows = k::weight_copy(w.narrow(0, 2, 3));
    CHECK(torch::equal(rows.copy, copy.copy.narrow(0, 2, 3)));
    at::autocast::set_autocast_dtype(c10::kCPU, torch::kHalf);
    CHECK_FALSE(k::weight_copy(w).copy.defined());
    at::autocast::set_autocast_enabled(c10::kCPU, false);
  }
  k::forbid_weight_copy(w);
  CHECK_FALSE(k::made_weight_copy(w).defined());
}

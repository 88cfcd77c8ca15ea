// The stability monitor on a small model: which parameter it names for an injected NaN, when it
// asks to stop, and what its diagnosis advises for each kind of evidence.
#include "ampt/precision/stability_monitor.h"

#include "ampt/precision/loss_scaler.h"
#include "ampt/train/grad_clip.h"

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <limits>

using ampt::precision::BadStep;
using ampt::precision::LossScaler;
using ampt::precision::RunFacts;
using ampt::precision::StabilityMonitor;

namespace {

const torch::Device kCpuDevice(torch::kCPU);
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Three linear layers; parameters "0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias".
struct Fixture {
  int seeded = (torch::manual_seed(0), 0);  // before the layers draw their weights
  torch::nn::Sequential model{torch::nn::Linear(4, 8), torch::nn::ReLU(), torch::nn::Linear(8, 8),
                              torch::nn::ReLU(), torch::nn::Linear(8, 2)};
  LossScaler scaler{{false}, kCpuDevice};
  StabilityMonitor monitor;

  explicit Fixture(int64_t max_consecutive_skips = 3, int64_t flush_every = 1)
      : monitor(make_monitor(model, max_consecutive_skips, flush_every)) {}

  static StabilityMonitor make_monitor(const torch::nn::Sequential& model, int64_t max_skips,
                                       int64_t flush_every) {
    std::vector<torch::Tensor> params;
    std::vector<std::string> names;
    for (const auto& item : model->named_parameters()) {
      names.push_back(item.key());
      params.push_back(item.value());
    }
    return {params, names, kCpuDevice, max_skips, flush_every};
  }

  torch::Tensor parameter(const std::string& name) { return model->named_parameters()[name]; }

  // One training step as the trainer does it; `poison` may put a NaN into a gradient; `flush`:
  // a log step. Returns the skip flag.
  float step(int64_t number, const std::function<void()>& poison = [] {}, bool flush = false) {
    model->zero_grad();
    const auto loss = model->forward(torch::ones({3, 4})).pow(2).mean();
    loss.backward();
    poison();
    std::vector<torch::Tensor> grads;
    std::vector<int64_t> grad_params;
    for (const auto& p : model->parameters()) {
      grad_params.push_back(static_cast<int64_t>(grads.size()));
      grads.push_back(p.grad());
    }
    const auto skip = monitor.skip_flag(loss.detach(), scaler.unscale_(grads));
    monitor.observe(ampt::train::grad_norms(grads), scaler.update(skip), skip, grad_params);
    monitor.record(number, flush);
    return skip.item<float>();
  }
};

}  // namespace

TEST_CASE("stability monitor: clean steps report nothing", "[precision][stability]") {
  Fixture f;
  for (int64_t i = 1; i <= 5; ++i) CHECK(f.step(i) == 0.0F);
  CHECK(f.monitor.poll(/*wait=*/true).empty());
}

TEST_CASE("stability monitor: names the parameter whose gradient got the NaN", "[precision][stability]") {
  Fixture f;
  CHECK(f.step(1, [&] { f.parameter("2.weight").grad()[3][1] = kNaN; }) == 1.0F);
  const auto bad = f.monitor.poll(/*wait=*/true);
  REQUIRE(bad.size() == 1);
  CHECK(bad[0].step == 1);
  CHECK(bad[0].grad_parameter == "2.weight");
  CHECK(bad[0].nonfinite_grads == 1);
  CHECK(bad[0].grads == 6);
  CHECK_FALSE(bad[0].loss_nonfinite);
  CHECK(bad[0].weight_parameter.empty());
  CHECK(bad[0].consecutive == 1);
  CHECK(bad[0].what() == "non-finite gradient in '2.weight' (1 of 6 gradients)");
}

TEST_CASE("stability monitor: a NaN weight is named, with the loss and the gradients it spoiled", "[precision][stability]") {
  Fixture f;
  CHECK(f.step(1) == 0.0F);
  {
    torch::NoGradGuard no_grad;
    f.parameter("2.weight")[0][0] = kNaN;
  }
  CHECK(f.step(2) == 1.0F);
  const auto bad = f.monitor.poll(/*wait=*/true);
  REQUIRE(bad.size() == 1);
  CHECK(bad[0].step == 2);
  CHECK(bad[0].weight_parameter == "2.weight");
  CHECK(bad[0].loss_nonfinite);
  // The NaN output spoils every gradient, so the gradient evidence points at the last layer: the
  // weight check is what finds the culprit.
  CHECK(bad[0].grad_parameter == "4.bias");
  CHECK(bad[0].what() ==
        "non-finite weight '2.weight'; non-finite loss; non-finite gradient in '4.bias' (6 of 6 "
        "gradients)");
}

TEST_CASE("stability monitor: counts bad steps in a row and stops at the limit", "[precision][stability]") {
  Fixture f(/*max_consecutive_skips=*/3);
  auto poison = [&] { f.parameter("4.bias").grad()[0] = std::numeric_limits<float>::infinity(); };
  f.step(1, poison);
  f.step(2, poison);
  f.step(3);  // a clean step resets the streak
  f.step(4, poison);
  f.step(5, poison);
  f.step(6, poison);
  std::vector<int64_t> consecutive;
  std::vector<bool> stop;
  for (const auto& bad : f.monitor.poll(/*wait=*/true)) {
    consecutive.push_back(bad.consecutive);
    stop.push_back(f.monitor.must_stop(bad));
  }
  CHECK(consecutive == std::vector<int64_t>{1, 2, 1, 2, 3});
  CHECK(stop == std::vector<bool>{false, false, false, false, true});
}

TEST_CASE("stability monitor: more steps than its ring holds lose no record", "[precision][stability]") {
  Fixture f(/*max_consecutive_skips=*/0);
  for (int64_t i = 1; i <= 11; ++i) {
    f.step(i, [&] { f.parameter("0.bias").grad()[1] = kNaN; });
  }
  const auto bad = f.monitor.poll(/*wait=*/true);
  REQUIRE(bad.size() == 11);
  CHECK(bad.back().consecutive == 11);
  CHECK_FALSE(f.monitor.must_stop(bad.back()));  // 0 never stops
}

TEST_CASE("stability monitor: records reach the host only when a log step or a full batch of "
          "them flushes",
          "[precision][stability]") {
  Fixture f(/*max_consecutive_skips=*/0, /*flush_every=*/3);
  const auto poison = [&] { f.parameter("0.bias").grad()[1] = kNaN; };
  f.step(1, poison);
  f.step(2);
  CHECK(f.monitor.poll().empty());  // kept on the device
  f.step(3);                        // three kept: they go
  auto bad = f.monitor.poll();
  REQUIRE(bad.size() == 1);
  CHECK(bad[0].step == 1);
  f.step(4, poison, /*flush=*/true);  // a log step
  bad = f.monitor.poll();
  REQUIRE(bad.size() == 1);
  CHECK(bad[0].step == 4);
  f.step(5, poison);
  bad = f.monitor.poll(/*wait=*/true);  // the end of the run flushes what is kept
  REQUIRE(bad.size() == 1);
  CHECK(bad[0].step == 5);
}

TEST_CASE("stability monitor: a step that met targets outside the vocabulary says so",
          "[precision][stability]") {
  Fixture f;
  // kernels::TargetCheck's record: 2 bad targets, the first at position 5, of value 300.
  f.monitor.watch_targets(torch::tensor(std::vector<int64_t>{2, 5, 300}));
  // Its loss was made NaN.
  f.step(1, [&] { f.parameter("4.bias").grad()[0] = kNaN; });
  const auto bad = f.monitor.poll(/*wait=*/true);
  REQUIRE(bad.size() == 1);
  CHECK(bad[0].bad_targets == 2);
  CHECK(bad[0].target_position == 5);
  CHECK(bad[0].target_value == 300);
  CHECK_THAT(bad[0].what(), Catch::StartsWith("2 targets outside the vocabulary; "));
}

TEST_CASE("stability monitor: the diagnosis follows the evidence", "[precision][stability]") {
  BadStep bad;
  bad.step = 60;
  bad.consecutive = 50;
  bad.nonfinite_grads = 6;
  bad.grads = 6;
  bad.grad_parameter = "blocks.1.mlp.c_proj.weight";
  RunFacts bf16;
  bf16.precision = "BF16";
  bf16.lr = 3e-3;

  auto d = ampt::precision::diagnose(bad, bf16);
  CHECK(d.problem ==
        "50 steps in a row were skipped (steps 11-60); step 60: non-finite gradient in "
        "'blocks.1.mlp.c_proj.weight' (6 of 6 gradients)");
  // Every gradient is bad: no module to blame.
  CHECK(d.next == "lower the learning rate (--lr 0.0003)");
  BadStep local = bad;
  local.nonfinite_grads = 2;
  CHECK(ampt::precision::diagnose(local, bf16).next ==
        "lower the learning rate (--lr 0.0003), or keep the module 'blocks.1.mlp.c_proj' in fp32");

  BadStep weights = bad;
  weights.weight_parameter = "wte.weight";
  CHECK(ampt::precision::diagnose(weights, bf16).next ==
        "the weights diverged: lower the learning rate (--lr 0.0003) and restart from a "
        "checkpoint saved before step 11");

  BadStep first = bad;
  first.step = 50;  // the streak began at step 1
  CHECK_THAT(ampt::precision::diagnose(first, bf16).next,
             Catch::StartsWith("the very first step is not finite"));

  RunFacts fp16 = bf16;
  fp16.precision = "FP16";
  fp16.loss_scaling = true;
  fp16.dynamic_scale = true;
  fp16.init_scale = 1099511627776.0;
  fp16.scale = 1024.0;
  CHECK(ampt::precision::diagnose(first, fp16).next ==
        "no step has succeeded yet and the scale is still 1024 after backing off from "
        "1.09951e+12: lower the initial scale (--grad_scaler_init 1024) or raise "
        "--max_consecutive_skips");

  BadStep floor = local;
  floor.floor_hit = true;
  fp16.scale = 1.0;
  fp16.min_loss_scale = 1.0;
  d = ampt::precision::diagnose(floor, fp16);
  CHECK(d.problem == "step 60 overflowed with the loss scale already at min_loss_scale 1; step 60: "
                     "non-finite gradient in 'blocks.1.mlp.c_proj.weight' (2 of 6 gradients)");
  CHECK(d.next == "fp16's range is too small for these gradients even at loss scale 1: switch "
                  "--mixed_precision fp16 to bf16, or keep the module 'blocks.1.mlp.c_proj' in fp32");

  BadStep forward = bad;
  forward.loss_nonfinite = true;
  CHECK_THAT(ampt::precision::diagnose(forward, fp16).next,
             Catch::StartsWith("the forward pass overflows fp16's range: switch --mixed_precision fp16 to bf16"));

  fp16.dynamic_scale = false;
  fp16.scale = 128.0;
  CHECK_THAT(ampt::precision::diagnose(bad, fp16).next,
             Catch::StartsWith("the fixed loss scale 128 overflows fp16: lower --loss_scale"));
}

// The loss scaler step by step against hand-computed trajectories and torch.amp.GradScaler.
#include "ampt/precision/loss_scaler.h"

#include "support/process.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <torch/torch.h>

#include <filesystem>
#include <limits>
#include <sstream>

using ampt::precision::LossScaler;
using ampt::precision::LossScalerOptions;
using ampt::precision::LossScalerState;

namespace {

const torch::Device kCpu(torch::kCPU);

// One optimizer step's worth of scaler work on a gradient that is finite or holds an inf.
float step(LossScaler& scaler, bool overflow) {
  auto grad = torch::full({4}, 3.0F) * scaler.state().scale;
  if (overflow) grad[2] = std::numeric_limits<float>::infinity();
  const auto found_inf = scaler.unscale_({grad});
  scaler.update(found_inf);
  return found_inf.item<float>();
}

struct Point {
  float scale;
  int32_t tracker;
};

std::vector<Point> trajectory(LossScaler& scaler, const std::vector<bool>& overflows) {
  std::vector<Point> out;
  for (bool overflow : overflows) {
    step(scaler, overflow);
    const auto s = scaler.state();
    out.push_back({s.scale, s.growth_tracker});
  }
  return out;
}

}  // namespace

TEST_CASE("loss scaler: unscale divides by the scale and flags inf and NaN", "[precision][scaler]") {
  LossScaler scaler({true, 1024.0, 2.0, 0.5, 2000}, kCpu);
  auto a = torch::tensor({1024.0F, -2048.0F, 512.0F});
  auto b = torch::tensor({3072.0F});
  auto found = scaler.unscale_({a, b});
  CHECK(found.item<float>() == 0.0F);
  CHECK(torch::equal(a, torch::tensor({1.0F, -2.0F, 0.5F})));
  CHECK(torch::equal(b, torch::tensor({3.0F})));

  auto nan = torch::tensor({1.0F, std::numeric_limits<float>::quiet_NaN()});
  CHECK(scaler.unscale_({nan}).item<float>() == 1.0F);
  auto inf = torch::tensor({-std::numeric_limits<float>::infinity()});
  CHECK(scaler.unscale_({a, inf}).item<float>() == 1.0F);
}

TEST_CASE("loss scaler: unscale of several dtypes reports found_inf as exactly 1", "[precision][scaler]") {
  LossScaler scaler({true, 8.0, 2.0, 0.5, 2000}, kCpu);
  auto f32 = torch::tensor({std::numeric_limits<float>::infinity()});
  auto f64 = torch::tensor({std::numeric_limits<double>::infinity()}, torch::kFloat64);
  // Two groups both overflowing must not count as 2: the fused optimizer skips only on 1.
  CHECK(scaler.unscale_({f32, f64}).item<float>() == 1.0F);
}

TEST_CASE("loss scaler: inf at step k backs off and resets the tracker", "[precision][scaler]") {
  LossScaler scaler({true, 65536.0, 2.0, 0.5, 3}, kCpu);
  // Hand-computed: tracker counts clean steps; at 3 the scale doubles and the tracker resets;
  // an inf halves the scale and resets the tracker.
  const auto got = trajectory(scaler, {false, false, true, false, false, false, true, true});
  const std::vector<Point> expected{{65536, 1}, {65536, 2}, {32768, 0}, {32768, 1},
                                    {32768, 2}, {65536, 0}, {32768, 0}, {16384, 0}};
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("step " << i + 1);
    CHECK(got[i].scale == expected[i].scale);
    CHECK(got[i].tracker == expected[i].tracker);
  }
}

TEST_CASE("loss scaler: grows after exactly growth_interval clean steps", "[precision][scaler]") {
  LossScaler scaler({true, 4.0, 4.0, 0.25, 5}, kCpu);
  for (int i = 1; i <= 4; ++i) {
    step(scaler, false);
    CHECK(scaler.state().scale == 4.0F);
    CHECK(scaler.state().growth_tracker == i);
  }
  step(scaler, false);
  CHECK(scaler.state().scale == 16.0F);
  CHECK(scaler.state().growth_tracker == 0);
  step(scaler, true);
  CHECK(scaler.state().scale == 4.0F);
}

TEST_CASE("loss scaler: never grows into inf", "[precision][scaler]") {
  const double big = std::ldexp(1.0, 127);  // doubling it overflows float32
  LossScaler scaler({true, big, 2.0, 0.5, 1}, kCpu);
  scaler.update(scaler.unscale_({torch::ones({3})}));
  CHECK(scaler.state().scale == static_cast<float>(big));
  CHECK(std::isfinite(scaler.state().scale));
}

TEST_CASE("loss scaler: disabled scaler keeps scale 1 but still detects inf", "[precision][scaler]") {
  LossScaler scaler({false, 65536.0, 2.0, 0.5, 1}, kCpu);
  auto loss = torch::tensor(2.5F);
  CHECK(scaler.scale(loss).item<float>() == 2.5F);
  CHECK(step(scaler, true) == 1.0F);
  CHECK(step(scaler, false) == 0.0F);
  CHECK(scaler.state().scale == 1.0F);
  CHECK(scaler.state().growth_tracker == 0);
}

TEST_CASE("loss scaler: state round-trips and the trajectory continues identically", "[precision][scaler]") {
  const LossScalerOptions options{true, 1024.0, 2.0, 0.5, 2};
  LossScaler original(options, kCpu);
  trajectory(original, {false, true, false});
  const LossScalerState saved = original.state();

  LossScaler restored(options, kCpu);
  restored.load_state(saved);
  CHECK(restored.state().scale == saved.scale);
  CHECK(restored.state().growth_tracker == saved.growth_tracker);

  const std::vector<bool> rest{false, false, true, false, false};
  const auto a = trajectory(original, rest);
  const auto b = trajectory(restored, rest);
  for (size_t i = 0; i < rest.size(); ++i) {
    CHECK(a[i].scale == b[i].scale);
    CHECK(a[i].tracker == b[i].tracker);
  }
}

TEST_CASE("loss scaler: trajectory equals torch.amp.GradScaler in Python", "[precision][scaler][python]") {
  if (!std::filesystem::exists(AMPT_PYTHON)) {
    WARN("skipping the Python comparison: " AMPT_PYTHON " not found");
    return;
  }
  // A fixed pseudo-random pattern of overflow and clean steps, long enough to grow and back off.
  std::vector<bool> overflows;
  uint32_t state = 12345;
  for (int i = 0; i < 60; ++i) {
    state = state * 1103515245U + 12345U;
    overflows.push_back((state >> 16) % 5 == 0);
  }
  const LossScalerOptions options{true, 4096.0, 3.0, 0.25, 4};
  LossScaler scaler(options, kCpu);
  std::ostringstream ours;
  std::string pattern;
  for (const auto& p : trajectory(scaler, overflows)) ours << p.scale << ' ' << p.tracker << '\n';
  for (bool o : overflows) pattern += o ? '1' : '0';

  const std::string script = R"(
import sys, torch
pattern, init, growth, backoff, interval = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
w = torch.nn.Parameter(torch.zeros(4))
opt = torch.optim.SGD([w], lr=0.1)
scaler = torch.amp.GradScaler("cpu", init_scale=init, growth_factor=growth, backoff_factor=backoff, growth_interval=interval)
for c in pattern:
    scaler.scale(torch.ones(()))  # GradScaler creates its state lazily here
    g = torch.full((4,), 3.0) * scaler.get_scale()
    if c == "1":
        g[2] = float("inf")
    w.grad = g
    scaler.step(opt)
    scaler.update()
    print(f"{scaler.get_scale():g} {int(scaler._growth_tracker.item())}")
)";
  const auto result = ampt::test::run_process(
      {AMPT_PYTHON, "-c", script, pattern, "4096", "3", "0.25", "4"});
  INFO(result.err);
  REQUIRE(result.exit_code == 0);
  CHECK(result.out == ours.str());
}

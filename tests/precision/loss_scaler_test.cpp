// The loss scaler step by step against hand-computed trajectories and torch.amp.GradScaler.
#include "ampt/precision/loss_scaler.h"

#include "ampt/core/errors.h"
#include "support/process.h"
#include "support/skip.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <torch/torch.h>

#include <filesystem>
#include <limits>
#include <sstream>

using ampt::precision::LossScaler;
using ampt::precision::LossScalerOptions;
using ampt::precision::LossScalerState;
using ampt::config::ScalerRules;

namespace {

const torch::Device kHost(torch::kCPU);

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
  int32_t hysteresis = 0;  // compared only where the test says so
};

std::vector<Point> trajectory(LossScaler& scaler, const std::vector<bool>& overflows) {
  std::vector<Point> out;
  for (bool overflow : overflows) {
    step(scaler, overflow);
    const auto s = scaler.state();
    out.push_back({s.scale, s.growth_tracker, s.hysteresis});
  }
  return out;
}

// A fixed pseudo-random pattern of overflow (1) and clean (0) steps.
std::vector<bool> pattern_of(int length, uint32_t seed, uint32_t one_in) {
  std::vector<bool> overflows;
  for (int i = 0; i < length; ++i) {
    seed = seed * 1103515245U + 12345U;
    overflows.push_back((seed >> 16) % one_in == 0);
  }
  return overflows;
}

std::string as_text(const std::vector<bool>& overflows) {
  std::string text;
  for (bool o : overflows) text += o ? '1' : '0';
  return text;
}

LossScalerOptions deepspeed(double init, int64_t window, int64_t hysteresis, bool consecutive,
                            double min_scale = 0.0) {
  LossScalerOptions o;
  o.init_scale = init;
  o.growth_interval = window;
  o.rules = ScalerRules::deepspeed;
  o.hysteresis = hysteresis;
  o.consecutive_hysteresis = consecutive;
  o.min_scale = min_scale;
  return o;
}

void check_trajectory(const std::vector<Point>& got, const std::vector<Point>& expected) {
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("step " << i + 1);
    CHECK(got[i].scale == expected[i].scale);
    CHECK(got[i].tracker == expected[i].tracker);
    CHECK(got[i].hysteresis == expected[i].hysteresis);
  }
}

}  // namespace

TEST_CASE("loss scaler: unscale divides by the scale and flags inf and NaN", "[precision][scaler]") {
  LossScaler scaler({true, 1024.0, 2.0, 0.5, 2000}, kHost);
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
  LossScaler scaler({true, 8.0, 2.0, 0.5, 2000}, kHost);
  auto f32 = torch::tensor({std::numeric_limits<float>::infinity()});
  auto f64 = torch::tensor({std::numeric_limits<double>::infinity()}, torch::kFloat64);
  // Two groups both overflowing must not count as 2: the fused optimizer skips only on 1.
  CHECK(scaler.unscale_({f32, f64}).item<float>() == 1.0F);
}

TEST_CASE("loss scaler: inf at step k backs off and resets the tracker", "[precision][scaler]") {
  LossScaler scaler({true, 65536.0, 2.0, 0.5, 3}, kHost);
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
  LossScaler scaler({true, 4.0, 4.0, 0.25, 5}, kHost);
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
  LossScaler scaler({true, big, 2.0, 0.5, 1}, kHost);
  scaler.update(scaler.unscale_({torch::ones({3})}));
  CHECK(scaler.state().scale == static_cast<float>(big));
  CHECK(std::isfinite(scaler.state().scale));
}

TEST_CASE("loss scaler: disabled scaler keeps scale 1 but still detects inf", "[precision][scaler]") {
  LossScaler scaler({false, 65536.0, 2.0, 0.5, 1}, kHost);
  auto loss = torch::tensor(2.5F);
  CHECK(scaler.scale(loss).item<float>() == 2.5F);
  CHECK(step(scaler, true) == 1.0F);
  CHECK(step(scaler, false) == 0.0F);
  CHECK(scaler.state().scale == 1.0F);
  CHECK(scaler.state().growth_tracker == 0);
}

TEST_CASE("loss scaler: state round-trips and the trajectory continues identically", "[precision][scaler]") {
  const LossScalerOptions options{true, 1024.0, 2.0, 0.5, 2};
  LossScaler original(options, kHost);
  trajectory(original, {false, true, false});
  const LossScalerState saved = original.state();

  LossScaler restored(options, kHost);
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
    AMPT_SKIP(reference, "skipping the Python comparison: " AMPT_PYTHON " not found");
  }
  // Each case: growth factor, backoff, interval and a pattern long enough to grow and back off.
  // The last grows on every clean step from 2^120, so it also checks "never grow into inf".
  struct Case {
    double init, growth, backoff;
    int64_t interval;
    std::vector<bool> overflows;
  };
  const std::vector<Case> cases{{4096.0, 3.0, 0.25, 4, pattern_of(60, 12345, 5)},
                                {65536.0, 2.0, 0.5, 3, pattern_of(80, 777, 3)},
                                {std::ldexp(1.0, 120), 2.0, 0.5, 1, pattern_of(40, 99, 7)}};
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
  for (const auto& c : cases) {
    LossScaler scaler({true, c.init, c.growth, c.backoff, c.interval}, kHost);
    std::ostringstream ours;
    for (const auto& p : trajectory(scaler, c.overflows)) ours << fmt::format("{:g} {}\n", p.scale, p.tracker);
    const auto result = ampt::test::run_process(
        {AMPT_PYTHON, "-c", script, as_text(c.overflows), fmt::format("{}", c.init),
         fmt::format("{}", c.growth), fmt::format("{}", c.backoff), fmt::format("{}", c.interval)});
    INFO(result.err);
    REQUIRE(result.exit_code == 0);
    CHECK(result.out == ours.str());
  }
}

TEST_CASE("loss scaler: deepspeed rules, hand-computed hysteresis trajectory", "[precision][scaler]") {
  // Hysteresis 2, window 3. Overflow 1 only spends hysteresis; overflow 2 halves the scale. The
  // scale grows on the 4th clean step after an overflow (tracker 3 % 3 == 0), refilling the
  // hysteresis; without consecutive_hysteresis a clean step does not refill it, so the overflow
  // at step 9 (one clean step after the one at 7 spent it) backs off at once.
  const std::vector<bool> pattern{true, true, false, false, false, false, true, false, true, true};
  LossScaler plain(deepspeed(1024.0, 3, 2, false), kHost);
  check_trajectory(trajectory(plain, pattern),
                   {{1024, 0, 1}, {512, 0, 1}, {512, 1, 1}, {512, 2, 1}, {512, 3, 1},
                    {1024, 4, 2}, {1024, 0, 1}, {1024, 1, 1}, {512, 0, 1}, {256, 0, 1}});
  // consecutive_hysteresis refills after every clean step: step 9 only spends it again.
  LossScaler consecutive(deepspeed(1024.0, 3, 2, true), kHost);
  check_trajectory(trajectory(consecutive, pattern),
                   {{1024, 0, 1}, {512, 0, 1}, {512, 1, 2}, {512, 2, 2}, {512, 3, 2},
                    {1024, 4, 2}, {1024, 0, 1}, {1024, 1, 2}, {1024, 0, 1}, {512, 0, 1}});
}

TEST_CASE("loss scaler: deepspeed rules grow every window, one step later than torch", "[precision][scaler]") {
  // DeepSpeed grows when (iterations since the last overflow - 1) is a positive multiple of the
  // window: the 3rd, 5th and 7th clean step for window 2; torch grows on the 2nd, 4th, 6th.
  LossScaler ds(deepspeed(8.0, 2, 1, false), kHost);
  const std::vector<bool> clean(7, false);
  const auto got = trajectory(ds, clean);
  const std::vector<float> expected{8, 8, 16, 16, 32, 32, 64};
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i].scale == expected[i]);
  LossScaler torch_rules({true, 8.0, 2.0, 0.5, 2}, kHost);
  const std::vector<float> torch_expected{8, 16, 16, 32, 32, 64, 64};
  const auto torch_got = trajectory(torch_rules, clean);
  for (size_t i = 0; i < torch_got.size(); ++i) CHECK(torch_got[i].scale == torch_expected[i]);
}

TEST_CASE("loss scaler: deepspeed rules equal DeepSpeed's update_scale transcribed in Python", "[precision][scaler][python]") {
  if (!std::filesystem::exists(AMPT_PYTHON)) {
    AMPT_SKIP(reference, "skipping the Python comparison: " AMPT_PYTHON " not found");
  }
  // DynamicLossScaler.update_scale from deepspeed/runtime/fp16/loss_scaler.py, logging removed
  // and raise_error_at_min_scale off (ampt stops the run instead; see the floor test).
  const std::string script = R"(
import sys
class DynamicLossScaler:
    def __init__(self, init_scale, scale_window, min_scale, delayed_shift, consecutive_hysteresis):
        self.cur_scale = init_scale
        self.cur_iter = 0
        self.last_overflow_iter = -1
        self.scale_factor = 2.0
        self.scale_window = scale_window
        self.min_scale = min_scale
        self.delayed_shift = delayed_shift
        self.cur_hysteresis = delayed_shift
        self.consecutive_hysteresis = consecutive_hysteresis
    def update_scale(self, overflow):
        if overflow:
            if self.delayed_shift == 1 or self.cur_hysteresis == 1:
                self.cur_scale = max(self.cur_scale / self.scale_factor, self.min_scale)
            else:
                self.cur_hysteresis -= 1
            self.last_overflow_iter = self.cur_iter
        else:
            if self.consecutive_hysteresis:
                self.cur_hysteresis = self.delayed_shift
            stable_interval = (self.cur_iter - self.last_overflow_iter) - 1
            if (stable_interval > 0) and (stable_interval % self.scale_window == 0):
                if not self.consecutive_hysteresis:
                    self.cur_hysteresis = self.delayed_shift
                self.cur_scale *= self.scale_factor
        self.cur_iter += 1
pattern, init, window, min_scale, hysteresis, consecutive = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]), sys.argv[6] == "1"
s = DynamicLossScaler(init, window, min_scale, hysteresis, consecutive)
for c in pattern:
    s.update_scale(c == "1")
    print(f"{s.cur_scale:g} {s.cur_iter - s.last_overflow_iter - 1} {s.cur_hysteresis}")
)";
  struct Case {
    double init;
    int64_t window, hysteresis;
    bool consecutive;
    double min_scale;
    std::vector<bool> overflows;
  };
  const std::vector<Case> cases{{65536.0, 4, 3, false, 1.0, pattern_of(120, 4242, 3)},
                                {65536.0, 4, 3, true, 1.0, pattern_of(120, 4242, 3)},
                                {1024.0, 2, 2, false, 64.0, pattern_of(100, 31337, 2)},
                                {256.0, 5, 1, false, 0.5, pattern_of(100, 8, 4)},
                                {4.0, 3, 4, true, 0.25, pattern_of(150, 2024, 2)}};
  for (const auto& c : cases) {
    LossScaler scaler(deepspeed(c.init, c.window, c.hysteresis, c.consecutive, c.min_scale), kHost);
    std::ostringstream ours;
    for (const auto& p : trajectory(scaler, c.overflows)) {
      ours << fmt::format("{:g} {} {}\n", p.scale, p.tracker, p.hysteresis);
    }
    const auto result = ampt::test::run_process(
        {AMPT_PYTHON, "-c", script, as_text(c.overflows), fmt::format("{}", c.init),
         fmt::format("{}", c.window), fmt::format("{}", c.min_scale),
         fmt::format("{}", c.hysteresis), c.consecutive ? "1" : "0"});
    INFO(result.err);
    REQUIRE(result.exit_code == 0);
    CHECK(result.out == ours.str());
  }
}

TEST_CASE("loss scaler: an overflow at min_loss_scale is reported, as DeepSpeed raises", "[precision][scaler]") {
  for (const auto rules : {ScalerRules::torch, ScalerRules::deepspeed}) {
    LossScalerOptions o = deepspeed(1024.0, 100, 1, false, 256.0);
    o.rules = rules;
    LossScaler scaler(o, kHost);
    std::vector<float> floor_hits;
    std::vector<float> scales;
    for (int i = 0; i < 4; ++i) {
      auto grad = torch::full({2}, std::numeric_limits<float>::infinity());
      const auto hit = scaler.update(scaler.unscale_({grad}));
      REQUIRE(hit.defined());
      floor_hits.push_back(hit.item<float>());
      scales.push_back(scaler.state().scale);
    }
    CHECK(scales == std::vector<float>{512, 256, 256, 256});
    CHECK(floor_hits == std::vector<float>{0, 0, 1, 1});
  }
  // No floor, no report (and no extra work on the step).
  LossScaler plain({true, 1024.0, 2.0, 0.5, 100}, kHost);
  CHECK_FALSE(plain.update(torch::ones({})).defined());
}

TEST_CASE("loss scaler: max_loss_scale caps growth and min_loss_scale stops backoff under torch rules", "[precision][scaler]") {
  LossScalerOptions o;
  o.init_scale = 4.0;
  o.growth_interval = 1;
  o.max_scale = 16.0;
  o.min_scale = 1.0;
  LossScaler scaler(o, kHost);
  const auto got = trajectory(scaler, {false, false, false, true, true, true, true, false});
  const std::vector<float> expected{8, 16, 16, 8, 4, 2, 1, 2};
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i].scale == expected[i]);
}

TEST_CASE("loss scaler: a static scale never changes and still flags inf", "[precision][scaler]") {
  LossScalerOptions o;
  o.static_scale = 128.0;
  o.growth_interval = 1;
  LossScaler scaler(o, kHost);
  CHECK_FALSE(scaler.dynamic());
  CHECK(scaler.scale(torch::tensor(2.0F)).item<float>() == 256.0F);
  auto grad = torch::tensor({256.0F, 128.0F});
  CHECK(scaler.unscale_({grad}).item<float>() == 0.0F);
  CHECK(torch::equal(grad, torch::tensor({2.0F, 1.0F})));
  for (bool overflow : {false, true, false, false}) CHECK(step(scaler, overflow) == (overflow ? 1.0F : 0.0F));
  CHECK(scaler.state().scale == 128.0F);
}

TEST_CASE("loss scaler: contradictory settings are usage errors", "[precision][scaler]") {
  auto message = [](const LossScalerOptions& o) {
    try {
      LossScaler scaler(o, kHost);
    } catch (const ampt::UsageError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  LossScalerOptions o;
  o.hysteresis = 2;
  CHECK(message(o) ==
        "hysteresis 2 needs grad_scaler_rules deepspeed: torch.amp.GradScaler backs off on every "
        "overflow");
  o = {};
  o.min_scale = 2.0 * o.init_scale;
  CHECK(message(o) == "grad_scaler_init 65536 is below min_loss_scale 131072");
  o = {};
  o.max_scale = 1024.0;
  CHECK(message(o) == "grad_scaler_init 65536 is above max_loss_scale 1024");
  o.min_scale = 2048.0;
  CHECK(message(o) == "min_loss_scale 2048 is above max_loss_scale 1024");
}

TEST_CASE("loss scaler: deepspeed state round-trips with its hysteresis", "[precision][scaler]") {
  const auto options = deepspeed(1024.0, 3, 3, false);
  LossScaler original(options, kHost);
  trajectory(original, {true, false});
  const auto saved = original.state();
  CHECK(saved.hysteresis == 2);
  LossScaler restored(options, kHost);
  restored.load_state(saved);
  const std::vector<bool> rest{true, true, false, false, false, false, true};
  check_trajectory(trajectory(restored, rest), trajectory(original, rest));
}

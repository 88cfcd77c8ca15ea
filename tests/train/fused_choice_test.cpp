// --fused_kernels auto: the choice from what a GPU measured and what its memory holds, the
// measurement's turns, and the option's spellings.
#include "ampt/config/resolve.h"
#include "ampt/models/catalog.h"
#include "ampt/train/fused_choice.h"

#include <catch2/catch.hpp>

#include <vector>

using ampt::train::choose_fused;
using ampt::train::FusedTiming;

namespace {
constexpr int64_t kGiB = int64_t{1} << 30;
}  // namespace

TEST_CASE("fused choice: the faster of the two where both fit, the fused ones where the plain "
          "ops would not fit or nothing was measured",
          "[train][fused_choice]") {
  const auto plain_faster = choose_fused(FusedTiming{41.0, 38.2}, "", 20 * kGiB, 70 * kGiB);
  CHECK_FALSE(plain_faster.fused);
  CHECK(plain_faster.line == "Fused kernels: auto: off (the plain ATen ops), a forward and "
                             "backward measured 41.0 ms fused against 38.2 ms with the plain ops");
  const auto fused_faster = choose_fused(FusedTiming{35.0, 38.4}, "", 20 * kGiB, 70 * kGiB);
  CHECK(fused_faster.fused);
  CHECK(fused_faster.line == "Fused kernels: auto: on, a forward and backward measured 35.0 ms "
                             "fused against 38.4 ms with the plain ops");
  // A batch whose logits do not fit whole keeps the chunked head whatever was measured.
  const auto memory = choose_fused(FusedTiming{41.0, 38.2}, "", 92 * kGiB, 70 * kGiB);
  CHECK(memory.fused);
  CHECK(memory.line == "Fused kernels: auto: on, for memory: the plain ops would need 92.0 GiB "
                       "of the GPU's 70.0 usable");
  const auto unmeasured = choose_fused(std::nullopt, "fp8 runs its Linear layers and head "
                                       "through them", 1 * kGiB, 70 * kGiB);
  CHECK(unmeasured.fused);
  CHECK(unmeasured.line == "Fused kernels: auto: on (fp8 runs its Linear layers and head "
                           "through them)");
}

TEST_CASE("fused choice: each pass timed in turns after a warm-up of each, the fused ones left "
          "on",
          "[train][fused_choice]") {
  std::vector<bool> order;
  bool fused = false;
  const auto timing = ampt::train::time_fused([&](bool on) { fused = on; },
                                              [&] { order.push_back(fused); }, c10::Device(c10::kCPU), 2);
  CHECK(order == std::vector<bool>{true, false, true, false, true, false});
  CHECK(fused);
  CHECK(timing.fused_ms >= 0.0);
  CHECK(timing.plain_ms >= 0.0);
}

TEST_CASE("fused_kernels: auto by default, true or false as a boolean, anything else an error "
          "naming the forms",
          "[train][fused_choice][config]") {
  using ampt::config::AutoSwitch;
  const auto resolve = [](std::vector<std::string> args) {
    return ampt::config::resolve(args, {}, ampt::models::catalog()).config().fused_kernels;
  };
  CHECK(resolve({}) == AutoSwitch::auto_select);
  CHECK(resolve({"--fused_kernels=false"}) == AutoSwitch::off);
  CHECK(resolve({"--fused_kernels=0"}) == AutoSwitch::off);
  CHECK(resolve({"--fused_kernels"}) == AutoSwitch::on);
  CHECK(resolve({"--fused_kernels=auto"}) == AutoSwitch::auto_select);
  CHECK_THROWS_WITH(resolve({"--fused_kernels=maybe"}),
                    "invalid value 'maybe' for fused_kernels (flag --fused_kernels): expected auto "
                    "or a boolean (true/false, yes/no, on/off, 1/0)");
}

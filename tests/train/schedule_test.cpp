#include "ampt/train/schedule.h"

#include <catch2/catch.hpp>

using ampt::train::LrSchedule;

TEST_CASE("lr schedule: linear warmup then cosine to the floor", "[train][schedule]") {
  const LrSchedule s{1.0, 0.1, 4, 14};
  // Warmup: (step + 1) / 4 of the peak.
  CHECK(s.at(0) == Approx(0.25));
  CHECK(s.at(1) == Approx(0.5));
  CHECK(s.at(3) == Approx(1.0));
  // Cosine over steps 4..13: progress (step - 4) / 9.
  CHECK(s.at(4) == Approx(1.0));
  CHECK(s.at(13) == Approx(0.1));
  CHECK(s.at(8) == Approx(0.1 + 0.5 * (1.0 + std::cos(3.14159265358979 * 4.0 / 9.0)) * 0.9));
  // Monotone decay after warmup.
  for (int64_t step = 4; step < 13; ++step) CHECK(s.at(step + 1) <= s.at(step));
}

TEST_CASE("lr schedule: no warmup starts at the peak", "[train][schedule]") {
  const LrSchedule s{3e-3, 3e-4, 0, 100};
  CHECK(s.at(0) == Approx(3e-3));
  CHECK(s.at(99) == Approx(3e-4));
  CHECK(s.at(150) == Approx(3e-4));
}

// Test cases for support/skip_test.cpp to run, one at a time, in a process of their own: each
// ends as a real test would, and the test reads the exit code CTest would see. Hidden ([.]), so
// no run of this executable without a name picks them.
#include "support/skip.h"

#include <catch2/catch.hpp>

TEST_CASE("probe: passes", "[.probe]") { CHECK(1 + 1 == 2); }

TEST_CASE("probe: no GPU", "[.probe]") {
  AMPT_SKIP(gpu, "no CUDA device: the probe's kernel needs one");
  FAIL("AMPT_SKIP returned to the test case");
}

TEST_CASE("probe: no reference", "[.probe]") {
  AMPT_SKIP(reference, "skipping: probe_package missing in the virtualenv");
  FAIL("AMPT_SKIP returned to the test case");
}

TEST_CASE("probe: a failure before a skip", "[.probe]") {
  CHECK(1 + 1 == 3);
  AMPT_SKIP(gpu, "no CUDA device");
}

#include "ampt/log/console_reporter.h"
#include "ampt/log/progress.h"

#include <catch2/catch.hpp>

using ampt::log::format_byte_progress;
using ampt::log::format_bytes;
using ampt::log::format_duration;
using ampt::log::format_progress;

TEST_CASE("progress bar: filled fraction, counts and ETA", "[log][progress]") {
  CHECK(format_progress(25, 100, 10.0, 20) ==
        "[#####...............]  25/100  25%  10.0 s elapsed, ETA 30.0 s");
  CHECK(format_progress(100, 100, 4.0, 4) == "[####] 100/100 100%  4.0 s elapsed, ETA 0.0 s");
  CHECK(format_progress(0, 10, 0.0, 2) == "[..]  0/10   0%  0.0 s elapsed, ETA 0.0 s");
}

TEST_CASE("progress bar in MiB: tokenizing text", "[log][progress]") {
  constexpr int64_t kMiB = 1024 * 1024;
  CHECK(format_byte_progress(45 * kMiB, 100 * kMiB, 12.0, 20) ==
        "[#########...........]  45.0/100.0 MiB  45%  12.0 s elapsed, ETA 14.7 s");
  CHECK(format_byte_progress(kMiB / 2, kMiB, 1.0, 2) == "[#.] 0.5/1.0 MiB  50%  1.0 s elapsed, ETA 1.0 s");
}

TEST_CASE("durations and byte counts read like a person would write them", "[log]") {
  CHECK(format_duration(1.25) == "1.2 s");
  CHECK(format_duration(185.0) == "3 min 05 s");
  CHECK(format_duration(7800.0) == "2 h 10 min");
  CHECK(format_bytes(512) == "512.0 B");
  CHECK(format_bytes(3 * 1024 * 1024 + 512 * 1024) == "3.5 MiB");
}

// The skip mechanism end to end: what a test executable's exit code says for a case that passed,
// skipped or failed (support/skip.h, catch_main.cpp), what CI means to it, and that CTest is told
// that code means a skip for every Catch test it runs; and that every test has a timeout.
#include "ampt/core/json_reader.h"
#include "support/process.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <set>
#include <string>

namespace {

ampt::test::ProcessResult probe(const std::string& test_case, const std::string& ci) {
  return ampt::test::run_process({AMPT_SKIP_PROBE, test_case}, {{"CI", ci}});
}

}  // namespace

TEST_CASE("skips: a skipped case exits with CTest's skip code, a failed one never does",
          "[tests][skip]") {
  const auto passed = probe("probe: passes", "false");
  CHECK(passed.exit_code == 0);

  const auto no_gpu = probe("probe: no GPU", "true");
  INFO(no_gpu.out << no_gpu.err);
  CHECK(no_gpu.exit_code == AMPT_SKIP_CODE);
  CHECK_THAT(no_gpu.out, Catch::Contains(
                             "ampt-test-skipped (no GPU): no CUDA device: the probe's kernel needs one"));

  const auto no_reference = probe("probe: no reference", "false");
  CHECK(no_reference.exit_code == AMPT_SKIP_CODE);
  CHECK_THAT(no_reference.out, Catch::Contains("ampt-test-skipped (no reference): skipping: "
                                               "probe_package missing in the virtualenv"));

  const auto failed = probe("probe: a failure before a skip", "false");
  CHECK(failed.exit_code != 0);
  CHECK(failed.exit_code != AMPT_SKIP_CODE);
}

TEST_CASE("skips: under CI=true a missing Python reference fails the test", "[tests][skip]") {
  const auto r = probe("probe: no reference", "true");
  INFO(r.out << r.err);
  CHECK(r.exit_code != 0);
  CHECK(r.exit_code != AMPT_SKIP_CODE);
  CHECK_THAT(r.out, Catch::Contains("a Python reference is missing under CI=true"));
  CHECK_THAT(r.out, Catch::Contains("probe_package missing"));
}

TEST_CASE("skips: CI set as CI systems set it (true, 1, a name) fails a missing reference, "
          "empty, 0, false, no or off skips it", "[tests][skip]") {
  for (const std::string ci : {"true", "TRUE", "1", "yes", "woodpecker"}) {
    const auto r = probe("probe: no reference", ci);
    INFO("CI=" << ci << "\n" << r.out << r.err);
    CHECK(r.exit_code != 0);
    CHECK(r.exit_code != AMPT_SKIP_CODE);
    CHECK_THAT(r.out, Catch::Contains("a Python reference is missing under CI=" + ci + ","));
  }
  for (const std::string ci : {"", "0", "false", "False", "no", "OFF"}) {
    const auto r = probe("probe: no reference", ci);
    INFO("CI=" << ci << "\n" << r.out << r.err);
    CHECK(r.exit_code == AMPT_SKIP_CODE);
  }
}

TEST_CASE("skips: .ci/run runs the suite under CI whatever CI the host had set", "[tests][skip]") {
  // .ci/run in a tree of its own, whose scripts/dev runs the probe's missing reference in place
  // of the suite: what .ci/run exits with is what that test would report there.
  const auto tree = ampt::test::make_temp_dir();
  ampt::test::write_file(tree + "/.ci/run", ampt::test::read_file(AMPT_SOURCE_DIR "/.ci/run"));
  ampt::test::write_file(tree + "/scripts/dev",
                         "#!/bin/sh\nexec '" AMPT_SKIP_PROBE "' 'probe: no reference'\n");
  for (const auto* script : {"/.ci/run", "/scripts/dev"}) {
    std::filesystem::permissions(tree + script, std::filesystem::perms::owner_all);
  }
  for (const std::string ci : {"", "1", "false"}) {
    const auto r = ampt::test::run_process({tree + "/.ci/run"}, {{"CI", ci}});
    INFO("CI=" << ci << "\n" << r.out << r.err);
    CHECK(r.exit_code != 0);
    CHECK(r.exit_code != AMPT_SKIP_CODE);
    CHECK_THAT(r.out, Catch::Contains("a Python reference is missing under CI=true,"));
  }
}

namespace {

// What `ctest --show-only=json-v1` lists of the build's tests.
ampt::JsonValue ctest_listing() {
  const auto listed = ampt::test::run_process({AMPT_CTEST, "--show-only=json-v1"}, {},
                                              AMPT_BUILD_DIR);
  REQUIRE(listed.exit_code == 0);
  return ampt::parse_json(listed.out);
}

// The value of a test's CTest property `name`, or nullptr.
const ampt::JsonValue* property(const ampt::JsonValue& test, const std::string& name) {
  if (const auto* properties = test.find("properties")) {
    for (const auto& p : properties->items) {
      const auto* key = p.find("name");
      if (key != nullptr && key->string == name) return p.find("value");
    }
  }
  return nullptr;
}

}  // namespace

TEST_CASE("skips: every Catch test CTest runs takes the skip code as a skip", "[tests][skip]") {
  const auto listing = ctest_listing();
  const auto* tests = listing.find("tests");
  REQUIRE(tests != nullptr);
  std::set<std::string> executables;
  int catch_tests = 0;
  for (const auto& test : tests->items) {
    const auto* command = test.find("command");
    if (command == nullptr || command->items.empty()) continue;
    const std::string program = command->items.front().string;
    if (program.find("/ampt_") == std::string::npos || !program.ends_with("_tests")) continue;
    ++catch_tests;
    executables.insert(program.substr(program.rfind('/') + 1));
    const auto* code = property(test, "SKIP_RETURN_CODE");
    INFO(test.find("name")->string);
    CHECK((code != nullptr && code->number == AMPT_SKIP_CODE));
  }
  CHECK(executables ==
        std::set<std::string>{"ampt_core_tests", "ampt_slurm_tests", "ampt_torch_tests"});
  CHECK(catch_tests > 600);
}

TEST_CASE("tests: every test CTest runs has a timeout of minutes, not CTest's 1,500 s",
          "[tests][timeout]") {
  const auto listing = ctest_listing();
  const auto* tests = listing.find("tests");
  REQUIRE(tests != nullptr);
  std::set<double> timeouts;
  for (const auto& test : tests->items) {
    INFO(test.find("name")->string);
    const auto* timeout = property(test, "TIMEOUT");
    REQUIRE(timeout != nullptr);
    CHECK(timeout->number > 0.0);
    CHECK(timeout->number <= 900.0);  // tests/CMakeLists.txt's longer one
    timeouts.insert(timeout->number);
  }
  CHECK(timeouts == std::set<double>{300.0, 900.0});
}

#include "support/skip.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <iostream>
#include <string>
#include <string_view>

namespace ampt::test {
namespace {

bool g_skipped = false;

std::string_view label(Missing what) {
  switch (what) {
    case Missing::gpu: return "no GPU";
    case Missing::reference: return "no reference";
    case Missing::slurm: return "no Slurm";
  }
  return "unknown";
}

// CI systems set CI to "true" (GitHub, GitLab, CircleCI, Buildkite), "1" or their own name
// (Woodpecker): any value but an empty one or a spelling of false counts, as .ci/run's CI=true
// does.
bool under_ci(std::string_view value) {
  std::string lower(value);
  std::ranges::transform(lower, lower.begin(), [](unsigned char c) { return std::tolower(c); });
  return !lower.empty() && lower != "0" && lower != "false" && lower != "no" && lower != "off";
}

}  // namespace

void skip(Missing what, const std::string& why) {
  const char* ci = std::getenv("CI");
  if (what == Missing::reference && ci != nullptr && under_ci(ci)) {
    FAIL("a Python reference is missing under CI=" << ci << ", where scripts/bootstrap.sh "
         "installs every one: " << why);
  }
  g_skipped = true;
  std::cout << "ampt-test-skipped (" << label(what) << "): " << why << std::endl;
}

bool any_skipped() { return g_skipped; }

}  // namespace ampt::test

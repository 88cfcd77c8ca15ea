#include "support/skip.h"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <iostream>
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

bool under_ci() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::string_view(ci) == "true";
}

}  // namespace

void skip(Missing what, const std::string& why) {
  if (what == Missing::reference && under_ci()) {
    FAIL("a Python reference is missing under CI=true, where scripts/bootstrap.sh installs every "
         "one: " << why);
  }
  g_skipped = true;
  std::cout << "ampt-test-skipped (" << label(what) << "): " << why << std::endl;
}

bool any_skipped() { return g_skipped; }

}  // namespace ampt::test

// The one translation unit that holds Catch2's main, shared by every test executable.
//
// A GPU is visible only where a selected test is tagged for one ([cuda], [cuda_graphs], [fp8]).
// Every other test, and every process it starts, runs as on a machine without a GPU even where
// one is present: CPU tests state CPU tolerances and CPU behaviour (`--device auto` picking the
// CPU, fp8 refused), and CI, which has no GPU, is where they are written and kept green.
//
// A run where every selected test case passed but one skipped (support/skip.h) exits with
// AMPT_SKIP_CODE, which CTest reports as skipped.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "support/skip.h"

#include <algorithm>
#include <cstdlib>

namespace {

bool wants_gpu(const Catch::TestCase& test) {
  return std::ranges::any_of(test.tags, [](const std::string& tag) {
    return tag == "cuda" || tag == "cuda_graphs" || tag == "fp8";
  });
}

}  // namespace

int main(int argc, char* argv[]) {
  Catch::Session session;
  if (const int rc = session.applyCommandLine(argc, argv); rc != 0) return rc;
  const auto& config = session.config();
  const auto selected =
      Catch::filterTests(Catch::getAllTestCasesSorted(config), config.testSpec(), config);
  // Before anything asks CUDA for its devices: the driver reads the variable once.
  if (std::ranges::none_of(selected, wants_gpu)) setenv("CUDA_VISIBLE_DEVICES", "", 1);
  int rc = session.run();
  // Catch2 exits with the number of failed assertions: that many must not read as a skip.
  if (rc == AMPT_SKIP_CODE) rc = 1;
  if (rc == 0 && ampt::test::any_skipped()) rc = AMPT_SKIP_CODE;
  return rc;
}

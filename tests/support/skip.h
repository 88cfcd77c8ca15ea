// A test case that cannot run on this machine says so and is reported as skipped, never passed:
// AMPT_SKIP records why and returns from the test case, and the test executable then exits with
// AMPT_SKIP_CODE, every test's SKIP_RETURN_CODE (tests/CMakeLists.txt). A case that failed
// before it skipped still fails.
#pragma once

#include <sstream>
#include <string>

namespace ampt::test {

// What the machine lacks; scripts/dev test's closing line counts the skips by it.
enum class Missing {
  gpu,        // a CUDA device
  reference,  // a Python reference (package or file) the bootstrap installs
  slurm,      // the one-node Slurm cluster of tests/slurm/cluster.sh
};

// Records the skip and prints "ampt-test-skipped (<what>): <why>". Under CI (the variable set to
// anything but empty, 0, false, no or off, in any case) a missing reference fails the test case
// instead: there the bootstrap has installed every one, so a missing one is a broken set-up, not
// a machine that cannot run the test.
void skip(Missing what, const std::string& why);

// Whether a test case of this process skipped (catch_main's exit code).
bool any_skipped();

}  // namespace ampt::test

// Records a skip where the test case returns by itself (a helper that answers false).
#define AMPT_NOTE_SKIP(what, why)                                          \
  do {                                                                     \
    std::ostringstream ampt_skip_why;                                      \
    ampt_skip_why << why;                                                  \
    ::ampt::test::skip(::ampt::test::Missing::what, ampt_skip_why.str()); \
  } while (false)

// Skips the rest of the test case; `why` is streamed as INFO and WARN stream theirs.
#define AMPT_SKIP(what, why)     \
  do {                           \
    AMPT_NOTE_SKIP(what, why);   \
    return;                      \
  } while (false)

// Group's small collectives, with every rank a thread of this process.
#include "ampt/distributed/process_group.h"
#include "dist_fixtures.h"

#include <catch2/catch.hpp>

#include <vector>

using ampt::distributed::Group;
using ampt::test::run_ranks;

TEST_CASE("broadcast_flags gives every rank the root's flags", "[dist]") {
  // Each rank starts from its own choice (as fp8's auto layer timings would give); rank 1's is
  // the one taken here, so the result is neither rank 0's nor a rank's own.
  std::vector<std::vector<bool>> seen(3);
  run_ranks(3, [&](Group& group) {
    const auto r = group.rank();
    std::vector<bool> own{r == 0, r == 1, r != 2, false, true};
    seen[r] = group.broadcast_flags(own, /*root=*/1, "the test's flags");
  });
  const std::vector<bool> rank1{false, true, true, false, true};
  for (const auto& flags : seen) CHECK(flags == rank1);
}

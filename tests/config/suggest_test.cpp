#include "ampt/config/suggest.h"

#include <catch2/catch.hpp>

using namespace ampt::config;

TEST_CASE("edit distance counts edits and adjacent swaps as one", "[config][suggest]") {
  CHECK(edit_distance("", "") == 0);
  CHECK(edit_distance("abc", "") == 3);
  CHECK(edit_distance("batch_size", "bach_size") == 1);
  CHECK(edit_distance("training", "trainig") == 1);
  CHECK(edit_distance("lr", "rl") == 1);  // transposition
  CHECK(edit_distance("kitten", "sitting") == 3);
}

TEST_CASE("closest suggests only plausible typos", "[config][suggest]") {
  const std::vector<std::string> names{"batch_size", "lr", "epochs", "training"};
  CHECK(closest("bach_size", names) == "batch_size");
  CHECK(closest("trainig", names) == "training");
  CHECK(closest("epoch", names) == "epochs");
  CHECK(closest("rl", names) == "lr");
  CHECK_FALSE(closest("xy", names));  // two substitutions rewrite a two-letter word entirely
  CHECK_FALSE(closest("completely_different", names));
  CHECK_FALSE(closest("", names));
  CHECK_FALSE(closest("bach_size", {}));
}

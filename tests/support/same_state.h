// Compares two checkpoints' training state in tests: equal, not close.
#pragma once

#include "ampt/checkpoint/checkpoint.h"

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <string>
#include <tuple>

namespace ampt::test {

// The model and optimizer tensors of the checkpoints at `a` and `b`, name by name, bit for bit.
inline void check_same_state(const std::string& a, const std::string& b) {
  const auto left = ampt::checkpoint::load(a);
  const auto right = ampt::checkpoint::load(b);
  for (const auto& [l, r] : {std::tie(left.model, right.model),
                              std::tie(left.optimizer, right.optimizer)}) {
    REQUIRE(l.size() == r.size());
    for (size_t i = 0; i < l.size(); ++i) {
      INFO(l[i].first);
      CHECK(l[i].first == r[i].first);
      CHECK(torch::equal(l[i].second, r[i].second));
    }
  }
}

}  // namespace ampt::test

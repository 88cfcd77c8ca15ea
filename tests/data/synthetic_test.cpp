#include "ampt/data/synthetic.h"

#include <catch2/catch.hpp>
#include <torch/torch.h>

using ampt::data::SyntheticClassification;

TEST_CASE("synthetic data: seeded, shaped, every class present", "[data][synthetic]") {
  const SyntheticClassification a(4096, 12, 7, 5);
  const SyntheticClassification b(4096, 12, 7, 5);
  const SyntheticClassification c(4096, 12, 7, 6);
  CHECK(a.inputs.sizes() == torch::IntArrayRef({4096, 12}));
  CHECK(a.targets.sizes() == torch::IntArrayRef({4096}));
  CHECK(torch::equal(a.inputs, b.inputs));
  CHECK(torch::equal(a.targets, b.targets));
  CHECK_FALSE(torch::equal(a.inputs, c.inputs));
  CHECK(std::get<0>(torch::_unique(a.targets)).numel() == 7);
}

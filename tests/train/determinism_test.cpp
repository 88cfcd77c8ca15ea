// --deterministic switches torch to deterministic kernels and reseeds the default generator.
#include "ampt/train/determinism.h"

#include <ATen/Context.h>
#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <cstdlib>

TEST_CASE("determinism: the flag turns on deterministic algorithms and seeds the generator", "[train][determinism]") {
  auto& context = at::globalContext();
  const bool was_deterministic = context.deterministicAlgorithms();
  ampt::train::apply_determinism(false, 7);
  CHECK(context.deterministicAlgorithms() == was_deterministic);

  ampt::train::apply_determinism(true, 7);
  CHECK(context.deterministicAlgorithms());
  CHECK_FALSE(context.deterministicAlgorithmsWarnOnly());
  CHECK(context.deterministicCuDNN());
  CHECK_FALSE(context.benchmarkCuDNN());
  CHECK(std::getenv("CUBLAS_WORKSPACE_CONFIG") != nullptr);
  const auto first = torch::rand({4});
  ampt::train::apply_determinism(true, 7);
  CHECK(torch::equal(first, torch::rand({4})));
  context.setDeterministicAlgorithms(was_deterministic, false);
}

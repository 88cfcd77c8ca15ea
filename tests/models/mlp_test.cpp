#include "ampt/models/registry.h"

#include <catch2/catch.hpp>
#include <torch/torch.h>

TEST_CASE("mlp: output shape and parameter count", "[models][mlp]") {
  ampt::config::Config config;
  config.mlp_hidden = 16;
  config.mlp_layers = 3;
  auto model = ampt::models::make_model(config, {8, 5});
  CHECK(model.forward(torch::randn({4, 8})).sizes() == torch::IntArrayRef({4, 5}));
  // (8*16 + 16) + 2 * (16*16 + 16) + (16*5 + 5)
  CHECK(ampt::models::parameter_count(*model.module) == 144 + 2 * 272 + 85);
}

TEST_CASE("models: the same seed gives the same initial weights", "[models]") {
  ampt::config::Config config;
  torch::manual_seed(11);
  auto a = ampt::models::make_model(config, {4, 3});
  torch::manual_seed(11);
  auto b = ampt::models::make_model(config, {4, 3});
  const auto pa = a.module->parameters();
  const auto pb = b.module->parameters();
  REQUIRE(pa.size() == pb.size());
  for (size_t i = 0; i < pa.size(); ++i) CHECK(torch::equal(pa[i], pb[i]));
}

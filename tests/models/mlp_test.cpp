// The MLP classifier through the registry.
#include "ampt/core/errors.h"
#include "ampt/models/registry.h"

#include <catch2/catch.hpp>
#include <torch/torch.h>

using ampt::data::DataSpec;
using ampt::data::Task;

TEST_CASE("mlp: output shape, parameter count and FLOPs", "[models][mlp]") {
  ampt::config::Config config;
  config.mlp_hidden = 16;
  config.mlp_layers = 3;
  auto model = ampt::models::make_model(config, DataSpec{Task::classification, {8}, 5});
  CHECK(model.forward(torch::randn({4, 8})).sizes() == torch::IntArrayRef({4, 5}));
  // (8*16 + 16) + 2 * (16*16 + 16) + (16*5 + 5)
  CHECK(ampt::models::parameter_count(*model.module) == 144 + 2 * 272 + 85);
  // 6 FLOPs per weight (2 per multiply-accumulate, times 3 for forward + backward).
  CHECK(model.flops_per_sample == 6 * (8 * 16 + 2 * 16 * 16 + 16 * 5));
  CHECK(model.tokens_per_sample == 1);
}

TEST_CASE("mlp: images are flattened, token blocks refused", "[models][mlp]") {
  ampt::config::Config config;
  config.mlp_hidden = 16;
  auto model = ampt::models::make_model(config, DataSpec{Task::classification, {1, 4, 2}, 3});
  CHECK(model.forward(torch::randn({2, 1, 4, 2})).sizes() == torch::IntArrayRef({2, 3}));
  CHECK_THROWS_WITH(
      ampt::models::make_model(config, DataSpec{Task::language_model, {64}, 256}),
      "model mlp needs classification samples; the dataset gives language-model samples of "
      "shape {64}");
}

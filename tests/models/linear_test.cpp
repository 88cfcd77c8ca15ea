// The Linear seam's deferred weights: a quantized base that a checkpoint gives is built without its
// dense weights.
#include "ampt/models/linear.h"
#include "ampt/models/registry.h"
#include "ampt/precision/placeholder.h"

#include <catch2/catch.hpp>
#include <torch/torch.h>

namespace {

ampt::models::Model llama(bool deferred) {
  ampt::config::Config config;
  config.model = "llama";
  config.n_layer = 2;
  config.lora_rank = 4;
  torch::manual_seed(11);
  const ampt::models::DeferredWeights guard(deferred);
  return ampt::models::make_model(config, {ampt::data::Task::language_model, {16}, 256});
}

}  // namespace

TEST_CASE("linear: deferred weights are placeholders that keep shapes, counts and the random stream",
          "[models][qlora]") {
  auto plain = llama(false);
  auto deferred = llama(true);
  const auto awaiting = ampt::models::awaiting_weights(*deferred.module);
  CHECK(awaiting.size() == 2 * 7);  // q, k, v, o, gate, up, down in each block
  CHECK(ampt::models::awaiting_weights(*plain.module).empty());
  CHECK(awaiting.count("layers.1.mlp.down_proj.weight") == 1);

  auto plain_params = plain.module->named_parameters();
  for (const auto& item : deferred.module->named_parameters()) {
    INFO(item.key());
    const auto& p = item.value();
    CHECK(p.sizes() == plain_params[item.key()].sizes());
    if (awaiting.count(item.key()) > 0) {
      CHECK(ampt::precision::is_placeholder(p));
      CHECK(p.storage().nbytes() == static_cast<size_t>(p.element_size()));  // one element
    } else {
      // The embedding, the norms and the adapters drew what they would have: the placeholders
      // consumed the random stream as the dense weights do.
      CHECK(torch::equal(p, plain_params[item.key()]));
    }
  }
  // Moved, a placeholder stays one; the frozen embedding and norms become placeholders too.
  ampt::precision::defer_frozen_parameters(*deferred.module);
  ampt::precision::move_to(*deferred.module, torch::kCPU);
  for (const auto& item : deferred.module->named_parameters()) {
    INFO(item.key());
    CHECK(ampt::precision::is_placeholder(item.value()) != item.value().requires_grad());
  }
  // Quantizing gives the layer its values; it no longer awaits them.
  auto* layer = awaiting.at("layers.0.self_attn.q_proj.weight");
  const auto values = plain_params["layers.0.self_attn.q_proj.weight"].to(torch::kBFloat16);
  layer->quantize(values, ampt::config::BaseDtype::int8);
  CHECK_FALSE(layer->awaiting());
  CHECK(ampt::precision::is_placeholder(layer->weight));
  CHECK(torch::allclose(layer->quantized()->dequantize(torch::kFloat), values.to(torch::kFloat),
                        0.0, values.abs().max().item<double>() / 127.0));
}

// The Linear seam's deferred weights: a quantized base that a checkpoint gives is built without its
// dense weights.
#include "ampt/models/linear.h"
#include "ampt/models/registry.h"
#include "ampt/precision/nf4.h"
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
  const auto& layer = awaiting.at("layers.0.self_attn.q_proj.weight");
  const auto values = plain_params["layers.0.self_attn.q_proj.weight"].to(torch::kBFloat16);
  layer.owner->quantize(layer.index, values, ampt::config::BaseDtype::int8);
  CHECK_FALSE(layer.owner->awaiting(layer.index));
  CHECK(ampt::precision::is_placeholder(layer.parameter()));
  CHECK(torch::allclose(layer.quantized()->dequantize(torch::kFloat), values.to(torch::kFloat),
                        0.0, values.abs().max().item<double>() / 127.0));
}

TEST_CASE("linear: a sparse model's deferred experts await their values as the Linears do",
          "[models][qlora][moe]") {
  ampt::config::Config config;
  config.model = "qwen3-moe";
  config.lora_rank = 4;
  const ampt::models::DeferredWeights guard(true);
  const auto model = ampt::models::make_model(config, {ampt::data::Task::language_model, {16}, 256});
  const auto awaiting = ampt::models::awaiting_weights(*model.module);
  for (const auto* name : {"layers.0.mlp.experts.gate_up_proj", "layers.1.mlp.experts.down_proj",
                           "layers.0.self_attn.o_proj.weight"}) {
    INFO(name);
    CHECK(awaiting.count(name) == 1);
  }
  CHECK(awaiting.count("layers.0.mlp.gate.weight") == 0);  // the router is no quantizable weight
  const auto& experts = awaiting.at("layers.0.mlp.experts.gate_up_proj");
  CHECK(ampt::precision::is_placeholder(experts.parameter()));
  const auto values = torch::randn(experts.parameter().sizes());
  experts.owner->quantize(experts.index, values, ampt::config::BaseDtype::nf4);
  CHECK(torch::equal(experts.quantized()->dequantize(torch::kFloat),
                     ampt::precision::dequantize_nf4(ampt::precision::quantize_nf4(values), torch::kFloat)));
}

// LoRA adapters attached to GPT and Llama models: peft's names and targets, the update against a
// hand computation, the merged weights, a frozen base, and activation checkpointing.
#include "ampt/core/errors.h"
#include "ampt/models/lora.h"
#include "ampt/models/moe.h"
#include "ampt/models/registry.h"

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <map>

using ampt::config::Config;
using ampt::data::DataSpec;
using ampt::data::Task;

namespace {

constexpr int64_t kLoraVocab = 32;
constexpr int64_t kLoraContext = 8;
constexpr int64_t kLoraWidth = 16;

Config small(const std::string& model, int64_t rank, const std::string& targets = "") {
  Config config;
  config.model = model;
  config.n_layer = 2;
  config.n_embd = kLoraWidth;
  config.n_head = 4;
  config.block_size = kLoraContext;
  config.vocab_size = kLoraVocab;
  config.lora_rank = rank;
  config.lora_alpha = 6.0;
  config.lora_targets = targets;
  return config;
}

ampt::models::Model build_lora_model(const Config& config) {
  torch::manual_seed(5);
  auto model = ampt::models::make_model(config, DataSpec{Task::language_model, {kLoraContext}, kLoraVocab});
  model.module->eval();
  return model;
}

std::map<std::string, torch::Tensor> parameters(const ampt::models::Model& model) {
  std::map<std::string, torch::Tensor> out;
  for (const auto& item : model.module->named_parameters()) out[item.key()] = item.value();
  return out;
}

// B is zero at the start: gives every B random values, so that the adapters change the logits.
void perturb_adapters(ampt::models::Model& model) {
  torch::NoGradGuard no_grad;
  for (auto& item : model.module->named_parameters()) {
    if (item.key().ends_with("lora_B.weight")) item.value().copy_(torch::randn_like(item.value()) * 0.3);
  }
}

torch::Tensor tokens() {
  torch::manual_seed(9);
  return torch::randint(0, kLoraVocab, {2, kLoraContext});
}

}  // namespace

TEST_CASE("lora: adapters carry peft's names, start as the base, and only they train",
          "[models][lora]") {
  for (const std::string model_name : {"gpt", "llama"}) {
    INFO(model_name);
    auto base = build_lora_model(small(model_name, 0));
    auto adapted = build_lora_model(small(model_name, 4));
    const auto params = parameters(adapted);
    int64_t trainable = 0;
    for (const auto& [name, p] : params) {
      CHECK(p.requires_grad() == ampt::models::is_lora_parameter(name));
      if (p.requires_grad()) trainable += p.numel();
    }
    if (model_name == "gpt") {
      // c_attn is [3C, C]: A [4, C] and B [3C, 4] in each of 2 layers.
      CHECK(params.at("h.1.attn.c_attn.lora_A.weight").sizes() == torch::IntArrayRef({4, kLoraWidth}));
      CHECK(params.at("h.1.attn.c_attn.lora_B.weight").sizes() == torch::IntArrayRef({3 * kLoraWidth, 4}));
      CHECK(trainable == 2 * 4 * (kLoraWidth + 3 * kLoraWidth));
    } else {
      // q_proj and v_proj (peft's default for Llama): [C, C] and [kv_heads·d, C].
      CHECK(params.count("layers.0.self_attn.q_proj.lora_A.weight") == 1);
      CHECK(params.count("layers.0.self_attn.v_proj.lora_B.weight") == 1);
      CHECK(params.count("layers.0.self_attn.k_proj.lora_A.weight") == 0);
    }
    torch::NoGradGuard no_grad;
    // B = 0: the adapted model is the base, whose weights the seed made the same.
    CHECK(torch::allclose(adapted.forward(tokens()), base.forward(tokens()), 0.0, 1e-6));
  }
}

TEST_CASE("lora: a target names a Linear or the end of its name after a dot, as peft's",
          "[models][lora]") {
  const auto adapted = [](const std::string& targets) {
    std::vector<std::string> names;
    for (const auto& [name, p] : parameters(build_lora_model(small("gpt", 2, targets)))) {
      if (name.ends_with(".lora_A.weight")) names.push_back(name.substr(0, name.size() - 14));
    }
    return names;
  };
  CHECK(adapted("c_proj") == std::vector<std::string>{"h.0.attn.c_proj", "h.0.mlp.c_proj",
                                                      "h.1.attn.c_proj", "h.1.mlp.c_proj"});
  CHECK(adapted("attn.c_proj, h.1.mlp.c_fc") ==
        std::vector<std::string>{"h.0.attn.c_proj", "h.1.attn.c_proj", "h.1.mlp.c_fc"});
  CHECK_THROWS_WITH(build_lora_model(small("gpt", 2, "c_attn,proj")),
                    Catch::StartsWith("lora_targets 'proj' matches no Linear layer of the model") &&
                        Catch::Contains("h.0.attn.c_attn"));
  auto mlp = small("mlp", 2);
  CHECK_THROWS_WITH(ampt::models::make_model(mlp, DataSpec{Task::classification, {8}, 3}),
                    Catch::StartsWith("lora_rank 2 with model 'mlp'"));
}

TEST_CASE("lora: the update is (alpha / r) B A x beside the frozen Linear, and merging folds it in",
          "[models][lora]") {
  for (const std::string model_name : {"gpt", "llama"}) {
    INFO(model_name);
    auto adapted = build_lora_model(small(model_name, 4, model_name == "gpt" ? "c_attn,c_fc" : "q_proj,down_proj"));
    perturb_adapters(adapted);
    torch::NoGradGuard no_grad;
    // One layer by hand.
    auto& linear = *adapted.module->named_modules()[model_name == "gpt" ? "h.0.mlp.c_fc"
                                                                          : "layers.0.mlp.down_proj"]
                        ->as<torch::nn::Linear>();
    const auto adapter = ampt::models::lora_adapter(linear);
    REQUIRE(adapter);
    CHECK(adapter.up->scaling == Approx(6.0 / 4));
    const auto x = torch::randn({3, linear.weight.size(1)});
    const auto expected = x.mm(linear.weight.t()) +
                          (linear.bias.defined() ? linear.bias : torch::zeros({1})) +
                          x.mm(adapter.down->weight.t()).mm(adapter.up->weight.t()) * 1.5;
    const auto update = ampt::models::lora_update(adapter, x, false);
    CHECK(torch::allclose(at::linear(x, linear.weight, linear.bias) + update, expected, 1e-5, 1e-6));

    // The whole model: the merged weights in a model without adapters give the same logits.
    auto plain = build_lora_model(small(model_name, 0));
    auto plain_params = parameters(plain);
    const auto merged = ampt::models::merged_lora_weights(*adapted.module);
    REQUIRE(merged.size() == plain_params.size());
    for (const auto& [name, tensor] : merged) plain_params.at(name).copy_(tensor);
    const auto logits = adapted.forward(tokens());
    CHECK(torch::allclose(plain.forward(tokens()), logits, 1e-4, 1e-5));
    CHECK((logits - build_lora_model(small(model_name, 0)).forward(tokens())).abs().max().item<double>() > 1e-3);
  }
}

TEST_CASE("lora: activation checkpointing gives the adapters the same gradients, the base none",
          "[models][lora]") {
  for (const std::string model_name : {"gpt", "llama"}) {
    INFO(model_name);
    std::map<std::string, torch::Tensor> grads[2];
    for (const bool ckpt : {false, true}) {
      auto config = small(model_name, 4, model_name == "gpt" ? "c_attn,c_proj" : "q_proj,v_proj,up_proj");
      config.grad_ckpt = ckpt;
      auto model = build_lora_model(config);
      model.module->train();
      perturb_adapters(model);
      const auto input = tokens();
      model.loss({input, input.roll(-1, 1)}).backward();
      for (const auto& [name, p] : parameters(model)) {
        if (!p.requires_grad()) {
          CHECK_FALSE(p.grad().defined());
        } else {
          REQUIRE(p.grad().defined());
          grads[ckpt][name] = p.grad();
        }
      }
    }
    REQUIRE(grads[0].size() == grads[1].size());
    for (const auto& [name, g] : grads[0]) {
      INFO(name);
      CHECK(torch::allclose(g, grads[1].at(name), 1e-5, 1e-7));
    }
  }
}

// peft's ParamWrapper on an expert group: one adapter per 3-D weight, A [r·E, in] and B
// [out, r·E], expert e's update s · B.view(out, r, E)[:, :, e] A.view(E, r, in)[e] added to its
// weight; named after the weight; merged into it; no dropout; a target parameter must name one.
TEST_CASE("lora: an expert group weight takes one adapter in peft's layout, merged per expert",
          "[models][lora][moe]") {
  static constexpr int64_t kExperts = 4, kWidth = 16, kInner = 8, kRank = 2;
  const auto make_root = [] {
    torch::manual_seed(4);
    auto root = std::make_shared<torch::nn::Module>();
    root->register_module("experts", ampt::models::Experts(kExperts, kWidth, kInner));
    return root;
  };
  const auto adapted_names = [](const torch::nn::Module& root) {
    std::vector<std::string> names;
    for (const auto& item : root.named_parameters()) {
      if (ampt::models::is_lora_parameter(item.key())) names.push_back(item.key());
    }
    return names;
  };
  ampt::models::LoraOptions options{kRank, 6.0, 0.0, {}, {"gate_up_proj"}};
  auto root = make_root();
  ampt::models::attach_lora(*root, options);
  CHECK(adapted_names(*root) == std::vector<std::string>{"experts.gate_up_proj.lora_A.weight",
                                                         "experts.gate_up_proj.lora_B.weight"});
  auto params = root->named_parameters();
  CHECK(params["experts.gate_up_proj.lora_A.weight"].sizes() == torch::IntArrayRef{kRank * kExperts, kWidth});
  CHECK(params["experts.gate_up_proj.lora_B.weight"].sizes() == torch::IntArrayRef{2 * kInner, kRank * kExperts});
  // --lora_targets reach an expert weight by the end of its name too.
  auto by_target = make_root();
  ampt::models::attach_lora(*by_target, {kRank, 6.0, 0.0, {"experts.down_proj"}, {}});
  CHECK(adapted_names(*by_target) == std::vector<std::string>{"experts.down_proj.lora_A.weight",
                                                              "experts.down_proj.lora_B.weight"});

  torch::NoGradGuard no_grad;
  auto& b = params["experts.gate_up_proj.lora_B.weight"];
  b.copy_(torch::randn_like(b));
  const auto& a = params["experts.gate_up_proj.lora_A.weight"];
  auto* experts = root->named_modules()["experts"]->as<ampt::models::Experts>();
  auto expected = experts->gate_up_proj.clone();
  for (int64_t e = 0; e < kExperts; ++e) {
    const auto b_e = b.view({2 * kInner, kRank, kExperts}).select(2, e);
    const auto a_e = a.view({kExperts, kRank, kWidth})[e];
    expected[e] += b_e.mm(a_e) * (6.0 / kRank);
  }
  const auto merged = ampt::models::merged_lora_weights(*root);
  REQUIRE(merged.size() == 2);
  CHECK(merged[0].first == "experts.gate_up_proj");
  CHECK(torch::allclose(merged[0].second, expected, 1e-5, 1e-6));
  // The forward reads the adapted weights: as a plain group holding the merged ones.
  auto plain = make_root();
  auto* plain_experts = plain->named_modules()["experts"]->as<ampt::models::Experts>();
  plain_experts->gate_up_proj.copy_(expected);
  const auto x = torch::randn({6, kWidth});
  const auto routing = ampt::models::route(torch::randn({6, kExperts}), 2, true);
  CHECK(torch::allclose(experts->forward(x, routing), plain_experts->forward(x, routing), 1e-5, 1e-6));
  {
    const ampt::models::AdaptersOff off;
    CHECK(torch::allclose(experts->forward(x, routing), make_root()->named_modules()["experts"]
                                                            ->as<ampt::models::Experts>()
                                                            ->forward(x, routing)));
  }

  auto with_dropout = options;
  with_dropout.dropout = 0.1;
  CHECK_THROWS_WITH(ampt::models::attach_lora(*make_root(), with_dropout),
                    Catch::StartsWith("lora_dropout 0.1 with lora_targets naming the expert weight "
                                      "experts.gate_up_proj"));
  CHECK_THROWS_WITH(ampt::models::attach_lora(*make_root(), {kRank, 6.0, 0.0, {}, {"up_proj"}}),
                    Catch::StartsWith("lora_target_parameters 'up_proj' matches no expert group "
                                      "weight of the model") &&
                        Catch::Contains("experts.gate_up_proj, experts.down_proj"));
}

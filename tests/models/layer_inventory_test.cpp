// A family's layer inventory is the built model's: the same blocks and the same Linear layers
// (names, shapes, biases, in module order), and the memory estimate, fp8 and LoRA read it.
#include "ampt/models/layer_inventory.h"

#include "ampt/models/linear.h"
#include "ampt/models/lora.h"
#include "ampt/plan/memory_estimate.h"
#include "ampt/models/registry.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

using ampt::config::Config;
using ampt::models::LinearRole;

namespace {

Config tiny_config(const std::string& model) {
  Config config;
  config.model = model;
  config.n_layer = 3;
  config.block_size = 16;
  return config;
}

ampt::models::Model build_with_dims(const Config& config, const ampt::models::ModelDims& dims) {
  torch::manual_seed(1);
  return ampt::models::make_model(
      config, {ampt::data::Task::language_model, {dims.seq_len}, dims.layers.head_out});
}

}  // namespace

TEST_CASE("layer inventory: the blocks and Linear layers the built model has, in order",
          "[models][inventory]") {
  // GPT-2 (fused q/k/v, biases), Llama (grouped-query: k and v narrower), Qwen2 (q/k/v
  // biases, a tied head), Qwen3 (q_proj wider than the model, o_proj narrowing it back) and
  // Mistral; Qwen3-MoE and Mixtral, whose sparse blocks list their attention as Linears, and
  // their routers and expert groups apart (no Linear layers).
  for (const auto* name : {"gpt", "llama", "qwen2", "qwen3", "mistral", "qwen3-moe", "mixtral"}) {
    INFO(name);
    const auto config = tiny_config(name);
    const auto dims = ampt::models::model_dims(config, {}, 0);
    const auto model = build_with_dims(config, dims);
    CHECK(model.layers.blocks == dims.layers.blocks);
    REQUIRE(dims.layers.blocks.size() == 3);
    std::vector<std::string> built;
    for (const auto& item : model.module->named_modules("", /*include_self=*/false)) {
      const auto* linear = dynamic_cast<const ampt::models::LinearImpl*>(item.value().get());
      if (linear == nullptr) continue;
      built.push_back(fmt::format("{} [{} -> {}]{}", item.key(), linear->weight.size(1),
                                  linear->weight.size(0), linear->bias.defined() ? " bias" : ""));
    }
    std::vector<std::string> listed;
    for (const auto& l : dims.layers.linears) {
      listed.push_back(fmt::format("{} [{} -> {}]{}", l.name, l.in, l.out, l.bias ? " bias" : ""));
      CHECK(l.name.starts_with(l.block + "."));
    }
    CHECK(listed == built);
    // A sparse block's router and expert group stacks: the built model's parameters of those
    // names and shapes ([experts, in]; [experts, out_e, in]).
    const auto parameters = model.module->named_parameters();
    std::vector<std::string> sparse_built, sparse_listed;
    for (const auto& item : parameters) {
      if (item.key().find(".mlp.gate.") != std::string::npos ||
          item.key().find(".experts.") != std::string::npos) {
        const auto shape = item.value().sizes().vec();
        sparse_built.push_back(fmt::format("{} [{}]", item.key(), fmt::join(shape, ", ")));
      }
    }
    for (const auto& router : dims.layers.routers) {
      CHECK(router.role == LinearRole::router);
      sparse_listed.push_back(fmt::format("{}.weight [{}, {}]", router.name, router.out, router.in));
      for (const auto& group : ampt::models::sparse_layers_of(dims.layers, router.block).expert_groups) {
        sparse_listed.push_back(fmt::format("{} [{}, {}, {}]", group.name, group.experts,
                                            group.out / group.experts, group.in));
      }
    }
    CHECK(sparse_listed == sparse_built);
    CHECK(sparse_listed.empty() == dims.layers.other_matmuls.empty());
    // What fp8 and adapters do not reach is said, for the fp8 layers table.
    CHECK(dims.layers.other_matmuls.empty() == (std::string(name) != "qwen3-moe" && std::string(name) != "mixtral"));
    CHECK(dims.layers.block_linears().size() == dims.layers.linears.size() / 3);
    // Every block is a module of that name, which ZeRO-3 gathers by.
    for (const auto& block : dims.layers.blocks) {
      CHECK(model.module->named_modules().contains(block));
    }
  }
}

TEST_CASE("layer inventory: roles name what a layer computes, whatever the family calls it",
          "[models][inventory]") {
  const auto gpt = ampt::models::model_dims(tiny_config("gpt"), {}, 0).layers.block_linears();
  const auto llama = ampt::models::model_dims(tiny_config("llama"), {}, 0).layers.block_linears();
  std::vector<LinearRole> gpt_roles, llama_roles;
  for (const auto& l : gpt) gpt_roles.push_back(l.role);
  for (const auto& l : llama) llama_roles.push_back(l.role);
  // (Parenthesised: Catch cannot print the roles.)
  CHECK((gpt_roles ==
         std::vector{LinearRole::qkv, LinearRole::o, LinearRole::fc, LinearRole::down}));
  CHECK((llama_roles == std::vector{LinearRole::q, LinearRole::k, LinearRole::v, LinearRole::o,
                                    LinearRole::gate, LinearRole::up, LinearRole::down}));
  // The layers that read a norm's output: the attention's and the MLP's input projections.
  CHECK(gpt[0].reads_norm());
  CHECK_FALSE(gpt[1].reads_norm());
  CHECK(gpt[2].reads_norm());
  CHECK_FALSE(gpt[3].reads_norm());
  CHECK(llama[5].reads_norm());
  CHECK_FALSE(llama[6].reads_norm());
}

TEST_CASE("layer inventory: LoRA's targets and fp8's candidates are the inventory's layers",
          "[models][inventory][lora][fp8]") {
  auto config = tiny_config("llama");
  config.lora_rank = 4;
  const auto dims = ampt::models::model_dims(config, {}, 0);
  std::vector<std::string> adapted;
  for (const auto& l : dims.lora.adapted) adapted.push_back(l.name);
  // peft's default for Llama: q_proj and v_proj of every block.
  CHECK(adapted == std::vector<std::string>{
                       "layers.0.self_attn.q_proj", "layers.0.self_attn.v_proj",
                       "layers.1.self_attn.q_proj", "layers.1.self_attn.v_proj",
                       "layers.2.self_attn.q_proj", "layers.2.self_attn.v_proj"});

  const auto candidates = ampt::models::fp8_candidates(dims.layers, /*fused_head=*/true);
  REQUIRE(candidates.size() == dims.layers.linears.size() + 1);
  CHECK(candidates.back().name == "head");
  CHECK(candidates.back().out == dims.layers.head_out);
  // Only GPT's fused MLP pairs its two Linears.
  for (const auto& c : candidates) CHECK(c.paired.empty());
}

TEST_CASE("linear seam: fp8 attaches by name from outside, and plain() says what fuses",
          "[models][inventory][fp8]") {
  const auto config = tiny_config("gpt");
  const auto dims = ampt::models::model_dims(config, {}, 0);
  auto model = build_with_dims(config, dims);
  const auto fp8_layers = [&] {
    std::vector<std::string> out;
    for (const auto& item : model.module->named_modules("", false)) {
      const auto* linear = dynamic_cast<const ampt::models::LinearImpl*>(item.value().get());
      if (linear != nullptr && linear->fp8()) out.push_back(item.key());
      if (linear != nullptr) CHECK(linear->plain() == !linear->fp8());
    }
    return out;
  };
  CHECK(fp8_layers().empty());
  ampt::models::attach_fp8(*model.module, {}, [](const std::string& name) {
    return name.ends_with("mlp.c_fc") || name == "h.1.attn.c_attn";
  });
  CHECK(fp8_layers() ==
        std::vector<std::string>{"h.0.mlp.c_fc", "h.1.attn.c_attn", "h.1.mlp.c_fc", "h.2.mlp.c_fc"});
  // Attaching again replaces the choice.
  ampt::models::attach_fp8(*model.module, {}, [](const std::string&) { return false; });
  CHECK(fp8_layers().empty());
}

TEST_CASE("linear seam: the plain route is at::linear, an adapter adds its update",
          "[models][inventory][lora]") {
  torch::manual_seed(3);
  ampt::models::Linear linear(8, 6, /*bias=*/true);
  const auto x = torch::randn({2, 5, 8});
  CHECK(torch::allclose(linear->forward(x), torch::linear(x, linear->weight, linear->bias)));
  CHECK(torch::allclose(linear->forward(x, /*epilogues=*/true),
                        torch::linear(x, linear->weight, linear->bias), 1e-6, 1e-6));
  CHECK(linear->plain());

  torch::nn::Module root;
  root.register_module("proj", linear);
  ampt::models::attach_lora(root, {2, 4.0, 0.0, {"proj"}});
  CHECK_FALSE(linear->plain());
  auto adapter = ampt::models::lora_adapter(*linear);
  REQUIRE(adapter);
  {
    torch::NoGradGuard no_grad;
    adapter.up->weight.normal_();
  }
  const auto update = torch::linear(torch::linear(x, adapter.down->weight), adapter.up->weight) * 2.0;
  CHECK(torch::allclose(linear->forward(x),
                        torch::linear(x, linear->weight, linear->bias) + update, 1e-5, 1e-5));
}

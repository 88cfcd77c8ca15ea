// O2's master weights and the fp32 islands, on a real GPT and MLP: dtypes, the gradient path
// into fp32 masters, the refresh of the half weights, dtype switches and the island forward.
#include "ampt/core/errors.h"
#include "ampt/precision/precision_islands.h"
#include "ampt/models/registry.h"
#include "ampt/precision/autocast_guard.h"
#include "ampt/precision/master_weights.h"
#include "ampt/train/optimizer.h"

#include <catch2/catch.hpp>
#include <torch/nn/functional/loss.h>

#include <map>

namespace {

using ampt::config::Config;
using ampt::data::DataSpec;
using ampt::data::Task;

ampt::models::Model tiny_gpt() {
  Config config;
  config.model = "gpt-tiny";
  torch::manual_seed(7);
  return ampt::models::make_model(config, {Task::language_model, {16}, 256});
}

std::map<std::string, torch::Tensor> params_of(const torch::nn::Module& module) {
  std::map<std::string, torch::Tensor> out;
  for (const auto& item : module.named_parameters()) out[item.key()] = item.value();
  return out;
}

torch::Tensor gpt_loss(ampt::models::Model& model, const ampt::precision::PrecisionIslands& islands,
                       c10::ScalarType dtype) {
  torch::manual_seed(3);
  const auto tokens = torch::randint(256, {4, 17});
  ampt::precision::AutocastGuard autocast(torch::kCPU, dtype, true);
  ampt::precision::IslandScope scope(&islands);
  const auto logits = model.forward(tokens.narrow(1, 0, 16));
  return torch::nn::functional::cross_entropy(logits.flatten(0, -2),
                                              tokens.narrow(1, 1, 16).flatten());
}

}  // namespace

TEST_CASE("master weights: O2 stores half weights over fp32 masters, islands stay fp32", "[precision][o2]") {
  auto model = tiny_gpt();
  const auto original = params_of(*model.module);
  std::map<std::string, torch::Tensor> before;
  for (const auto& [name, p] : original) before[name] = p.detach().clone();
  const auto islands = ampt::precision::select_islands(*model.module, {"wte"}, /*norms=*/true);
  ampt::precision::MasterWeights masters(*model.module, true, [&](const std::string& name) {
    return islands.owns_parameter(name);
  });
  masters.set_dtype(torch::kBFloat16);

  int half = 0;
  for (const auto& [name, p] : params_of(*model.module)) {
    INFO(name);
    const bool kept = name.starts_with("wte.") || name.find("ln_") != std::string::npos;
    CHECK(p.scalar_type() == (kept ? torch::kFloat : torch::kBFloat16));
    half += kept ? 0 : 1;
    // The very tensors the model was built with, converted in place (set_data).
    CHECK(p.unsafeGetTensorImpl() == original.at(name).unsafeGetTensorImpl());
  }
  CHECK(half == 2 * 8 + 1);  // per block 4 linears (weight + bias), and wpe
  for (const auto& [name, master] : masters.masters()) {
    INFO(name);
    CHECK(master.scalar_type() == torch::kFloat);
    CHECK(torch::equal(master, before.at(name)));  // the masters are the fp32 initial weights
    CHECK(torch::equal(params_of(*model.module).at(name), master.to(params_of(*model.module).at(name).scalar_type())));
  }
}

TEST_CASE("master weights: half gradients reach the fp32 masters and the step refreshes the half weights", "[precision][o2]") {
  auto model = tiny_gpt();
  const auto islands = ampt::precision::select_islands(*model.module, {}, /*norms=*/true);
  ampt::precision::MasterWeights masters(*model.module, true, [&](const std::string& name) {
    return islands.owns_parameter(name);
  });
  masters.set_dtype(torch::kBFloat16);
  gpt_loss(model, islands, torch::kBFloat16).backward();

  std::map<std::string, torch::Tensor> half_grads;
  for (const auto& [name, p] : params_of(*model.module)) half_grads[name] = p.grad();
  const auto grads = masters.master_grads();
  CHECK(grads.size() == half_grads.size());
  for (const auto& [name, master] : masters.masters()) {
    INFO(name);
    REQUIRE(master.grad().defined());
    CHECK(master.grad().scalar_type() == torch::kFloat);
    CHECK(torch::equal(master.grad(), half_grads.at(name).to(torch::kFloat)));
    const auto param = params_of(*model.module).at(name);
    // Half gradients are released once copied; the fp32 norms keep theirs (they are masters).
    CHECK(param.grad().defined() == (param.scalar_type() == torch::kFloat));
  }

  // An optimizer step on the masters, then the refresh: half weights = rounded masters.
  Config config;
  auto optimizer = ampt::train::make_optimizer(config, masters.masters());
  optimizer->step(1e-2, torch::zeros({}));
  masters.refresh_model();
  for (const auto& [name, master] : masters.masters()) {
    INFO(name);
    const auto param = params_of(*model.module).at(name);
    CHECK(torch::equal(param, master.to(param.scalar_type())));
    if (param.scalar_type() != torch::kFloat) CHECK_FALSE(master.grad().defined());
  }
}

TEST_CASE("master weights: a dtype switch re-casts from the masters, fp32 shares their storage", "[precision][o2]") {
  auto model = tiny_gpt();
  const auto islands = ampt::precision::select_islands(*model.module, {}, /*norms=*/true);
  ampt::precision::MasterWeights masters(*model.module, true, [&](const std::string& name) {
    return islands.owns_parameter(name);
  });
  const auto c_fc = params_of(*model.module).at("h.0.mlp.c_fc.weight");
  torch::Tensor master;
  for (const auto& [name, m] : masters.masters()) {
    if (name == "h.0.mlp.c_fc.weight") master = m;
  }
  CHECK(c_fc.data_ptr() == master.data_ptr());  // fp32 before any half dtype: one copy
  masters.set_dtype(torch::kBFloat16);
  {
    torch::NoGradGuard no_grad;
    master.add_(0.125);  // what an optimizer step does to a master
  }
  masters.refresh_model();
  CHECK(torch::equal(c_fc, master.to(torch::kBFloat16)));
  masters.set_dtype(torch::kHalf);
  CHECK(c_fc.scalar_type() == torch::kHalf);
  CHECK(torch::equal(c_fc, master.to(torch::kHalf)));
  masters.set_dtype(torch::kFloat);
  CHECK(c_fc.scalar_type() == torch::kFloat);
  CHECK(c_fc.data_ptr() == master.data_ptr());
  CHECK(torch::isfinite(gpt_loss(model, islands, torch::kBFloat16)).item<bool>());
}

TEST_CASE("master weights: disabled (O0, O1) the masters are the parameters", "[precision][o2]") {
  auto model = tiny_gpt();
  ampt::precision::MasterWeights masters(*model.module, false, [](const std::string&) { return false; });
  masters.set_dtype(torch::kBFloat16);  // ignored
  const auto params = params_of(*model.module);
  for (const auto& [name, master] : masters.masters()) {
    CHECK(master.unsafeGetTensorImpl() == params.at(name).unsafeGetTensorImpl());
    CHECK(master.scalar_type() == torch::kFloat);
  }
}

TEST_CASE("fp32 islands: a keep_fp32_modules module runs in fp32 under autocast, others in bf16", "[precision][islands]") {
  Config config;
  config.model = "mlp";
  config.mlp_layers = 2;
  torch::manual_seed(1);
  auto model = ampt::models::make_model(config, {Task::classification, {8}, 3});
  const auto islands = ampt::precision::select_islands(*model.module, {"head"}, /*norms=*/false);
  REQUIRE(islands.list().size() == 1);
  CHECK(islands.list()[0].reason == "keep_fp32_modules pattern 'head'");
  const auto x = torch::randn({5, 8});
  ampt::precision::AutocastGuard autocast(torch::kCPU, torch::kBFloat16, true);
  CHECK(model.forward(x).scalar_type() == torch::kBFloat16);  // no scope: plain autocast
  ampt::precision::IslandScope scope(&islands);
  const auto y = model.forward(x);
  CHECK(y.scalar_type() == torch::kFloat);
  // The head computed in fp32 from the bf16 hidden activations, exactly as an fp32 linear would.
  const auto* head = model.module->named_modules()["head"]->as<torch::nn::Linear>();
  CHECK(head->weight.scalar_type() == torch::kFloat);
}

TEST_CASE("fp32 islands: patterns match dotted suffixes and globs, unknown ones are usage errors", "[precision][islands]") {
  auto model = tiny_gpt();
  const auto islands = ampt::precision::select_islands(*model.module, {"ln_*", "h.1.attn"}, false);
  std::vector<std::string> names;
  for (const auto& island : islands.list()) names.push_back(island.name);
  CHECK(names == std::vector<std::string>{"h.0.ln_1", "h.0.ln_2", "h.1.ln_1", "h.1.attn", "h.1.ln_2", "ln_f"});
  CHECK(islands.owns_parameter("h.1.attn.c_attn.weight"));
  CHECK_FALSE(islands.owns_parameter("h.0.attn.c_attn.weight"));
  try {
    ampt::precision::select_islands(*model.module, {"lm_head"}, false);
    FAIL("no error");
  } catch (const ampt::UsageError& e) {
    const std::string message = e.what();
    CHECK(message.find("keep_fp32_modules pattern 'lm_head' matches no module") != std::string::npos);
    CHECK(message.find("wte") != std::string::npos);
    CHECK(message.find('\n') == std::string::npos);
  }
}

namespace {

// A model's own norm (an RMSNorm's shape): a norm by role, not by torch type.
class RootMeanSquareNorm : public torch::nn::Module, public ampt::precision::NormRole {
 public:
  explicit RootMeanSquareNorm(int64_t width) {
    weight = register_parameter("weight", torch::ones({width}));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    const auto rms = x.to(torch::kFloat).pow(2).mean(-1, true).add(1e-6).rsqrt();
    return (x.to(torch::kFloat) * rms * weight).to(x.scalar_type());
  }
  torch::Tensor weight;
};

}  // namespace

TEST_CASE("fp32 islands: a norm of a model's own is an island by its role under O2, and its "
          "weight stays fp32 beside half masters' weights",
          "[precision][islands][o2]") {
  torch::nn::Sequential model(torch::nn::Linear(8, 8), RootMeanSquareNorm(8), torch::nn::Linear(8, 4));
  const auto islands = ampt::precision::select_islands(*model, {}, /*norms=*/true);
  REQUIRE(islands.list().size() == 1);
  CHECK(islands.list()[0].name == "1");
  CHECK(islands.list()[0].reason == "norm layer");
  CHECK(ampt::precision::select_islands(*model, {}, /*norms=*/false).list().empty());
  ampt::precision::MasterWeights masters(
      *model, true, [&](const std::string& name) { return islands.owns_parameter(name); });
  masters.set_dtype(torch::kBFloat16);
  const auto params = params_of(*model);
  CHECK(params.at("0.weight").scalar_type() == torch::kBFloat16);
  CHECK(params.at("1.weight").scalar_type() == torch::kFloat);
  CHECK(params.at("2.weight").scalar_type() == torch::kBFloat16);
}

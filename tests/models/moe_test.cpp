// The Mixture-of-Experts pieces (models/moe.h) against references written token by token here:
// the experts' sort, slices and un-permutation, the router in fp32 under bf16 autocast, the
// load-balancing loss at its extremes, the router logits through activation checkpointing, and
// what a sparse model refuses.
#include "ampt/core/errors.h"
#include "ampt/models/llama.h"
#include "ampt/models/moe.h"
#include "ampt/models/registry.h"
#include "ampt/config/enum_names.h"
#include "ampt/precision/autocast_guard.h"
#include "ampt/precision/nf4.h"
#include "ampt/precision/placeholder.h"
#include "support/skip.h"

#include <catch2/catch.hpp>
#include <torch/torch.h>

namespace {

using ampt::models::Experts;
using ampt::models::Routing;

// y_t = Σ_k w_tk · down[e] (silu(gate[e] x_t) · up[e] x_t), one token and one slot at a time.
torch::Tensor per_token(const Experts& experts, const torch::Tensor& x, const Routing& routing) {
  const int64_t I = experts->down_proj.size(2);
  std::vector<torch::Tensor> rows;
  for (int64_t t = 0; t < x.size(0); ++t) {
    auto y = torch::zeros({x.size(1)}, x.options());
    for (int64_t k = 0; k < routing.experts.size(1); ++k) {
      const auto e = routing.experts[t][k].item<int64_t>();
      const auto gate_up = experts->gate_up_proj[e];
      const auto h = torch::silu(torch::mv(gate_up.narrow(0, 0, I), x[t])) *
                     torch::mv(gate_up.narrow(0, I, I), x[t]);
      y = y + routing.weights[t][k] * torch::mv(experts->down_proj[e], h);
    }
    rows.push_back(y);
  }
  return torch::stack(rows);
}

// |a - b| / |b| over the whole tensor, a brought to b's device and dtype.
double relative_error(const torch::Tensor& a, const torch::Tensor& b) {
  return ((a.to(b.device(), b.scalar_type()) - b).norm() / b.norm()).item<double>();
}

ampt::models::LlamaDims tiny_moe() {
  ampt::config::Config config;
  config.model = "qwen3-moe";
  return ampt::models::resolve_llama_dims(config);
}

}  // namespace

TEST_CASE("moe experts: tokens sorted by expert, one GEMM per slice and back equal a per-token loop",
          "[models][moe]") {
  torch::manual_seed(3);
  Experts experts(6, 16, 8);
  const auto x = torch::randn({10, 16}, torch::requires_grad());
  // Expert 5 picked by no token; expert 0 by most; a token's two slots in either order.
  const auto picked = torch::tensor({0, 1, 0, 2, 3, 0, 1, 0, 4, 0, 0, 3, 2, 0, 0, 1, 4, 0, 3, 0},
                                    torch::kInt64).view({10, 2});
  const auto weights = torch::rand({10, 2}, torch::requires_grad());
  const Routing routing{picked, weights};
  const auto y = experts->forward(x, routing);
  const auto expected = per_token(experts, x, routing);
  CHECK(torch::allclose(y, expected, 1e-5, 1e-6));
  // The gradients reach the input, the routing weights and every expert's weights as the loop's.
  const auto g = torch::randn_like(y);
  const auto ours = torch::autograd::grad({y}, {x, weights, experts->gate_up_proj, experts->down_proj}, {g});
  const auto theirs = torch::autograd::grad({expected}, {x, weights, experts->gate_up_proj, experts->down_proj}, {g});
  for (std::size_t i = 0; i < ours.size(); ++i) {
    INFO("gradient " << i);
    CHECK(torch::allclose(ours[i], theirs[i], 1e-5, 1e-6));
  }
  CHECK(ours[3][5].abs().max().item<double>() == 0.0);  // the idle expert learns nothing
}

TEST_CASE("moe router: top-k of an fp32 softmax, renormalised or not, and fp32 under bf16 autocast",
          "[models][moe]") {
  const auto logits = torch::tensor({{2.0F, 1.0F, 0.0F, -1.0F}, {-1.0F, 0.5F, 3.0F, 0.0F}});
  const auto p = torch::softmax(logits, -1);
  const auto raw = ampt::models::route(logits, 2, false);
  CHECK(torch::equal(raw.experts, torch::tensor({{0, 1}, {2, 1}}, torch::kInt64)));
  CHECK(torch::allclose(raw.weights[0], torch::stack({p[0][0], p[0][1]})));
  const auto renormalised = ampt::models::route(logits, 2, true);
  CHECK(torch::allclose(renormalised.weights.sum(-1), torch::ones({2})));
  CHECK(renormalised.weights[1][0].item<float>() ==
        Approx(p[1][2].item<float>() / (p[1][2] + p[1][1]).item<float>()));

  // Under bf16 autocast the router's logits are the fp32 run's, bit for bit: the same experts
  // are picked, whatever near-ties the test batch holds.
  torch::manual_seed(5);
  const auto dims = tiny_moe();
  const auto inventory = ampt::models::layer_inventory(dims);
  ampt::models::SparseMoe moe(dims, ampt::models::sparse_layers_of(inventory, "layers.0"));
  const auto x = torch::randn({4, 16, 64});
  const auto fp32 = moe->forward(x);
  ampt::models::SparseMoeImpl::Output bf16;
  {
    ampt::precision::AutocastGuard autocast(c10::kCPU, torch::kBFloat16, true);
    bf16 = moe->forward(x);
  }
  CHECK(bf16.router_logits.scalar_type() == torch::kFloat32);
  CHECK(torch::equal(bf16.router_logits, fp32.router_logits));
  CHECK(bf16.y.scalar_type() == torch::kBFloat16);  // the experts themselves run in bf16
  CHECK(relative_error(bf16.y, fp32.y) < 0.02);
}

TEST_CASE("moe router losses: the load-balancing loss top_k when even and the expert count when "
          "two experts take all, the z-loss and the experts' load by hand",
          "[models][moe]") {
  // 8 tokens over 4 experts: each token's top 2 rotate, and every expert's mean probability is
  // the same, so f_e = 1/4 per slot and P_e = 1/4.
  std::vector<torch::Tensor> rows;
  for (int t = 0; t < 8; ++t) {
    auto row = torch::zeros({4});
    row[t % 4] = 1.0;
    row[(t + 1) % 4] = 1.0;
    rows.push_back(row);
  }
  const auto even = torch::stack(rows) * 5.0;
  CHECK(ampt::models::load_balance({even.narrow(0, 0, 4), even.narrow(0, 4, 4)}, 2).loss.item<double>() ==
        Approx(2.0));
  // Every token picks experts 0 and 1 with half the probability each: E · (1 · ½ + 1 · ½) = E.
  const auto skewed = torch::tensor({100.0F, 100.0F, 0.0F, 0.0F}).repeat({6, 1});
  CHECK(ampt::models::load_balance({skewed}, 2).loss.item<double>() == Approx(4.0));
  // The experts' load: twice an even share for experts 0 and 1, none for 2 and 3; even.
  CHECK(torch::equal(ampt::models::load_balance({skewed}, 2).load, torch::tensor({2.0F, 0.0F})));
  CHECK(torch::equal(ampt::models::load_balance({even.narrow(0, 0, 4), even.narrow(0, 4, 4)}, 2).load,
                     torch::tensor({1.0F, 1.0F})));
  // z-loss: logsumexp of four zeros is ln 4, of (100, 100, 0, 0) 100 + ln 2; their squares'
  // mean over all blocks' tokens.
  const auto z = ampt::models::router_z_loss({torch::zeros({2, 4}), skewed.narrow(0, 0, 2)});
  CHECK(z.item<double>() ==
        Approx((2 * std::pow(std::log(4.0), 2) + 2 * std::pow(100 + std::log(2.0), 2)) / 4));
}

TEST_CASE("moe blocks: router logits reach the loss through activation checkpointing",
          "[models][moe]") {
  ampt::config::Config config;
  config.model = "qwen3-moe";
  config.router_aux_loss_coef = 0.5;  // large enough for the router's gradient to show it
  config.router_z_loss_coef = 0.1;
  const ampt::data::DataSpec spec{ampt::data::Task::language_model, {16}, 256};
  const auto tokens = torch::randint(0, 256, {2, 17});
  const ampt::data::Batch batch{tokens.narrow(1, 0, 16), tokens.narrow(1, 1, 16)};
  std::vector<torch::Tensor> router_grads;
  std::vector<double> aux;
  for (const bool checkpointed : {false, true}) {
    config.grad_ckpt = checkpointed;
    torch::manual_seed(7);
    auto model = ampt::models::make_model(config, spec);
    model.module->train();
    const auto terms = model.loss_terms(batch);
    REQUIRE(model.loss_figures ==
            std::vector<std::string>{"aux_loss", "z_loss", "expert_load/max", "expert_load/min"});
    // The loss is the cross-entropy plus the aux loss and the z-loss at their weights.
    {
      torch::NoGradGuard no_grad;
      const auto ce = torch::nn::functional::cross_entropy(
          model.forward(batch.inputs).flatten(0, 1), batch.targets.flatten());
      CHECK(terms.loss.item<double>() ==
            Approx((ce + 0.5 * terms.figures[0] + 0.1 * terms.figures[1]).item<double>()).epsilon(1e-6));
    }
    terms.loss.backward();
    aux.push_back(terms.figures[0].item<double>());
    router_grads.push_back(model.module->named_parameters()["layers.1.mlp.gate.weight"].grad().clone());
  }
  CHECK(aux[0] == aux[1]);
  CHECK(router_grads[0].abs().max().item<double>() > 0.0);
  CHECK(torch::allclose(router_grads[0], router_grads[1], 1e-5, 1e-7));
}

TEST_CASE("moe experts stored quantized: the dense experts' outputs and input gradients over the "
          "dequantized weights, and no weight kept whole",
          "[models][moe][qlora]") {
  for (const auto format : {ampt::config::BaseDtype::nf4, ampt::config::BaseDtype::int8,
                            ampt::config::BaseDtype::bf16}) {
    INFO(ampt::config::to_string(format));
    for (const bool autocast : {false, true}) {
      INFO("bf16 autocast " << autocast);
      torch::manual_seed(3);
      Experts stored(6, 64, 32);
      Experts dense(6, 64, 32);
      {
        torch::NoGradGuard no_grad;
        for (size_t i = 0; i < 2; ++i) {
          stored->quantizable_parameter(i).requires_grad_(false);
          stored->quantize(i, stored->quantizable_parameter(i), format);
          dense->quantizable_parameter(i).copy_(stored->quantized(i)->dequantize(torch::kFloat));
        }
      }
      CHECK(ampt::precision::is_placeholder(stored->gate_up_proj));
      CHECK(ampt::precision::is_placeholder(stored->down_proj));
      if (format == ampt::config::BaseDtype::nf4) {
        CHECK(stored->quantized(0)->bytes() == ampt::precision::nf4_bytes(6 * 64 * 64));
      }
      const auto x = torch::randn({10, 64}, torch::requires_grad());
      // Expert 5 idle, as in the first case.
      const auto picked = torch::tensor({0, 1, 0, 2, 3, 0, 1, 0, 4, 0, 0, 3, 2, 0, 0, 1, 4, 0, 3, 0},
                                        torch::kInt64).view({10, 2});
      const Routing routing{picked, torch::rand({10, 2})};
      torch::Tensor ours, theirs;
      {
        ampt::precision::AutocastGuard guard(c10::kCPU, c10::kBFloat16, autocast);
        ours = stored->forward(x, routing);
        theirs = dense->forward(x, routing);
      }
      CHECK(ours.scalar_type() == theirs.scalar_type());
      CHECK(torch::allclose(ours.to(torch::kFloat), theirs.to(torch::kFloat), 1e-5, 1e-6));
      const auto g = torch::randn_like(ours);
      const auto dx = torch::autograd::grad({ours}, {x}, {g})[0];
      const auto expected = torch::autograd::grad({theirs}, {x}, {g})[0];
      CHECK(torch::allclose(dx, expected, 1e-5, 1e-6));
    }
  }
}

TEST_CASE("moe options: the router losses on a model without experts are refused in one line", "[models][moe]") {
  ampt::config::Config dense;
  dense.model = "qwen3";
  dense.router_aux_loss_coef = 0.01;
  CHECK_THROWS_WITH(ampt::models::resolve_llama_dims(dense),
                    "router_aux_loss_coef is for models with experts; model qwen3 has none");
  dense.router_aux_loss_coef = -1;
  dense.router_z_loss_coef = 0.001;
  CHECK_THROWS_WITH(ampt::models::resolve_llama_dims(dense),
                    "router_z_loss_coef is for models with experts; model qwen3 has none");
  dense.router_z_loss_coef = 0;
  dense.router_aux_loss_coef = -0.5;
  CHECK_THROWS_WITH(ampt::models::resolve_llama_dims(dense),
                    "router_aux_loss_coef -0.5: expected a weight >= 0, or -1 for the model's");
}

TEST_CASE("moe experts: one _grouped_mm on a GPU in bf16 equals one GEMM per expert",
          "[models][moe][cuda]") {
  if (!torch::cuda::is_available()) {
    AMPT_SKIP(gpu, "no CUDA device: at::_grouped_mm runs on one");
  }
  torch::manual_seed(11);
  Experts experts(8, 64, 32);
  {
    torch::NoGradGuard no_grad;  // weights of unit gain: outputs of order one
    experts->gate_up_proj.normal_(0.0, 0.125);
    experts->down_proj.normal_(0.0, 0.18);
  }
  const auto x = torch::randn({256, 64});
  const auto routing = ampt::models::route(torch::randn({256, 8}), 2, true);
  const auto on_cpu = experts->forward(x.to(torch::kBFloat16).to(torch::kFloat32), routing);
  experts->to(torch::kCUDA, torch::kBFloat16);
  const Routing on_gpu{routing.experts.cuda(), routing.weights.cuda()};
  const auto grouped = experts->forward(x.to(torch::kCUDA, torch::kBFloat16), on_gpu);
  CHECK(relative_error(grouped, on_cpu) < 0.02);
}

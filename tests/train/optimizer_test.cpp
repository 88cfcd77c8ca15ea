// The fused optimizers against LibTorch's own torch::optim implementations, and the skip rule.
#include "ampt/train/optimizer.h"

#include <catch2/catch.hpp>
#include <torch/torch.h>

namespace {

using ampt::config::Config;
using ampt::config::OptimizerKind;

struct Params {
  torch::Tensor matrix;
  torch::Tensor bias;
};

Params make_params() {
  torch::manual_seed(7);
  return {torch::randn({5, 3}).requires_grad_(), torch::randn({5}).requires_grad_()};
}

Params clone(const Params& p) {
  return {p.matrix.detach().clone().requires_grad_(), p.bias.detach().clone().requires_grad_()};
}

// Deterministic gradients that differ from step to step.
void set_grads(const Params& p, int step) {
  p.matrix.mutable_grad() = torch::sin(torch::arange(15, torch::kFloat32).reshape({5, 3}) + step);
  p.bias.mutable_grad() = torch::cos(torch::arange(5, torch::kFloat32) * 0.5 + step);
}

const auto kClean = torch::zeros({});
const auto kOverflow = torch::ones({});

// Six steps of ours and of LibTorch's reference on the same gradients; then the weights agree.
void step_side_by_side(ampt::train::Optimizer& optimizer, double lr, const Params& ours,
                       torch::optim::Optimizer& reference, const Params& ref) {
  for (int step = 0; step < 6; ++step) {
    set_grads(ours, step);
    set_grads(ref, step);
    optimizer.step(lr, kClean);
    reference.step();
  }
  CHECK(torch::allclose(ours.matrix, ref.matrix, 1e-6, 1e-6));
  CHECK(torch::allclose(ours.bias, ref.bias, 1e-6, 1e-6));
}

}  // namespace

TEST_CASE("fused adamw equals torch::optim::AdamW with decay on matrices only", "[train][optimizer]") {
  Config config;
  config.lr = 0.01;
  config.weight_decay = 0.1;
  const auto ours = make_params();
  const auto ref = clone(ours);
  auto optimizer = ampt::train::make_optimizer(config, {{"matrix", ours.matrix}, {"bias", ours.bias}});

  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<torch::Tensor>{ref.matrix},
                      std::make_unique<torch::optim::AdamWOptions>(
                          torch::optim::AdamWOptions(config.lr).weight_decay(0.1).betas({0.9, 0.999}).eps(1e-8)));
  groups.emplace_back(std::vector<torch::Tensor>{ref.bias},
                      std::make_unique<torch::optim::AdamWOptions>(
                          torch::optim::AdamWOptions(config.lr).weight_decay(0.0).betas({0.9, 0.999}).eps(1e-8)));
  torch::optim::AdamW reference(std::move(groups));

  step_side_by_side(*optimizer, config.lr, ours, reference, ref);
}

TEST_CASE("fused sgd with momentum equals torch::optim::SGD", "[train][optimizer]") {
  Config config;
  config.optimizer = OptimizerKind::sgd;
  config.lr = 0.05;
  config.momentum = 0.9;
  config.weight_decay = 0.0;
  const auto ours = make_params();
  const auto ref = clone(ours);
  auto optimizer = ampt::train::make_optimizer(config, {{"matrix", ours.matrix}, {"bias", ours.bias}});
  torch::optim::SGD reference({ref.matrix, ref.bias}, torch::optim::SGDOptions(0.05).momentum(0.9));
  step_side_by_side(*optimizer, config.lr, ours, reference, ref);
}

TEST_CASE("a step with found_inf leaves weights and optimizer state untouched", "[train][optimizer]") {
  for (auto kind : {OptimizerKind::adamw, OptimizerKind::sgd}) {
    Config config;
    config.optimizer = kind;
    config.lr = 0.01;
    // Run A: clean, skipped, clean. Run B: the same two clean steps without the skipped one.
    const auto a = make_params();
    const auto b = clone(a);
    auto opt_a = ampt::train::make_optimizer(config, {{"matrix", a.matrix}, {"bias", a.bias}});
    auto opt_b = ampt::train::make_optimizer(config, {{"matrix", b.matrix}, {"bias", b.bias}});

    set_grads(a, 0);
    opt_a->step(config.lr, kClean);
    const auto before_skip = a.matrix.detach().clone();
    set_grads(a, 1);
    a.matrix.mutable_grad()[0][0] = std::numeric_limits<float>::infinity();
    opt_a->step(config.lr, kOverflow);
    CHECK(torch::equal(a.matrix, before_skip));
    set_grads(a, 2);
    opt_a->step(config.lr, kClean);

    set_grads(b, 0);
    opt_b->step(config.lr, kClean);
    set_grads(b, 2);
    opt_b->step(config.lr, kClean);

    // Equal bit for bit: the skipped step also left Adam's step count and moments alone.
    CHECK(torch::equal(a.matrix, b.matrix));
    CHECK(torch::equal(a.bias, b.bias));
  }
}

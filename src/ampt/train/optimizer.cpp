#include "ampt/train/optimizer.h"

#include <ATen/ops/_foreach_add.h>
#include <ATen/ops/_foreach_sub.h>
#include <ATen/ops/_fused_adamw.h>
#include <ATen/ops/_fused_sgd.h>
#include <fmt/format.h>

namespace ampt::train {
namespace {

// Parameters sharing one weight decay, with per-parameter optimizer state in parallel lists.
struct Group {
  double weight_decay = 0.0;
  std::vector<std::string> names;
  std::vector<torch::Tensor> params;
  std::vector<std::vector<torch::Tensor>> state;  // state[k][i]: k-th state tensor of param i

  void append_named_state(const std::vector<std::string>& state_names, NamedTensors& out) const {
    for (size_t k = 0; k < state.size(); ++k) {
      for (size_t i = 0; i < params.size(); ++i) {
        out.emplace_back(names[i] + "." + state_names[k], state[k][i]);
      }
    }
  }

  // The parameters that received a gradient this step, their gradients and their state:
  // a parameter unused by the forward pass has no gradient and is left alone, as in PyTorch.
  struct Live {
    std::vector<torch::Tensor> params;
    std::vector<torch::Tensor> grads;
    std::vector<std::vector<torch::Tensor>> state;
  };
  Live live() const {
    Live out;
    out.state.resize(state.size());
    for (size_t i = 0; i < params.size(); ++i) {
      if (!params[i].grad().defined()) continue;
      out.params.push_back(params[i]);
      out.grads.push_back(params[i].grad());
      for (size_t k = 0; k < state.size(); ++k) out.state[k].push_back(state[k][i]);
    }
    return out;
  }
};

std::vector<Group> split_by_decay(const NamedTensors& parameters, double decay) {
  Group matrices{decay, {}, {}, {}};
  Group vectors{0.0, {}, {}, {}};
  for (const auto& [name, p] : parameters) {
    auto& group = p.dim() >= 2 ? matrices : vectors;
    group.names.push_back(name);
    group.params.push_back(p);
  }
  std::vector<Group> groups;
  for (auto* group : {&matrices, &vectors}) {
    if (!group->params.empty()) groups.push_back(std::move(*group));
  }
  return groups;
}

std::vector<torch::Tensor> zeros_like_each(const std::vector<torch::Tensor>& tensors) {
  std::vector<torch::Tensor> out;
  out.reserve(tensors.size());
  for (const auto& t : tensors) out.push_back(torch::zeros_like(t, torch::MemoryFormat::Preserve));
  return out;
}

class FusedAdamW final : public Optimizer {
 public:
  FusedAdamW(const config::Config& config, const NamedTensors& parameters)
      : weight_decay_(config.weight_decay),
        beta1_(config.adam_beta1),
        beta2_(config.adam_beta2),
        eps_(config.adam_eps),
        groups_(split_by_decay(parameters, config.weight_decay)) {
    for (auto& group : groups_) {
      std::vector<torch::Tensor> steps;
      for (const auto& p : group.params) {
        steps.push_back(torch::zeros({}, torch::dtype(torch::kFloat32).device(p.device())));
      }
      group.state = {zeros_like_each(group.params), zeros_like_each(group.params), steps};
    }
  }

  void step(double lr, const torch::Tensor& found_inf) override { step_with(lr, found_inf); }
  void step(const torch::Tensor& lr, const torch::Tensor& found_inf) override {
    step_with(lr, found_inf);
  }

  std::string describe() const override {
    return fmt::format("adamw (fused, betas=({}, {}), eps={}, weight_decay={} on matrices)", beta1_,
                       beta2_, eps_, weight_decay_);
  }

  std::string kind() const override { return "adamw"; }

  NamedTensors state() const override {
    NamedTensors out;
    for (const auto& group : groups_) group.append_named_state({"exp_avg", "exp_avg_sq", "step"}, out);
    return out;
  }

 private:
  // Lr: double or a device tensor, the two overloads of the fused kernel.
  template <class Lr>
  void step_with(const Lr& lr, const torch::Tensor& found_inf) {
    for (const auto& group : groups_) {
      auto live = group.live();
      if (live.params.empty()) continue;
      auto& steps = live.state[2];
      // As torch.optim's fused path: count the step, let the kernel skip on found_inf, then
      // take the count back for skipped steps, all on the device.
      at::_foreach_add_(steps, 1);
      at::_fused_adamw_(live.params, live.grads, live.state[0], live.state[1], {}, steps, lr,
                        beta1_, beta2_, group.weight_decay, eps_, /*amsgrad=*/false,
                        /*maximize=*/false, /*grad_scale=*/std::nullopt, found_inf);
      at::_foreach_sub_(steps, std::vector<torch::Tensor>(steps.size(), found_inf));
    }
  }

  double weight_decay_;
  double beta1_;
  double beta2_;
  double eps_;
  std::vector<Group> groups_;
};

class FusedSgd final : public Optimizer {
 public:
  FusedSgd(const config::Config& config, const NamedTensors& parameters)
      : weight_decay_(config.weight_decay),
        momentum_(config.momentum),
        groups_(split_by_decay(parameters, config.weight_decay)) {
    if (momentum_ == 0.0) return;
    for (auto& group : groups_) group.state = {zeros_like_each(group.params)};
  }

  void step(double lr, const torch::Tensor& found_inf) override { step_with(lr, found_inf); }
  void step(const torch::Tensor& lr, const torch::Tensor& found_inf) override {
    step_with(lr, found_inf);
  }

  std::string describe() const override {
    return fmt::format("sgd (fused, momentum={}, weight_decay={} on matrices)", momentum_,
                       weight_decay_);
  }

  std::string kind() const override { return "sgd"; }

  NamedTensors state() const override {
    NamedTensors out;
    for (const auto& group : groups_) group.append_named_state({"momentum_buffer"}, out);
    return out;
  }

 private:
  template <class Lr>
  void step_with(const Lr& lr, const torch::Tensor& found_inf) {
    for (const auto& group : groups_) {
      auto live = group.live();
      if (live.params.empty()) continue;
      const std::vector<torch::Tensor> no_buffers;
      // Zero-initialised buffers with is_first_step=false equal torch.optim.SGD's first step
      // (buffer = grad) for dampening 0, and stay correct when the first step is skipped.
      at::_fused_sgd_(live.params, live.grads, momentum_ == 0.0 ? no_buffers : live.state[0],
                      group.weight_decay, momentum_, lr, /*dampening=*/0.0, /*nesterov=*/false,
                      /*maximize=*/false, /*is_first_step=*/false, /*grad_scale=*/std::nullopt,
                      found_inf);
    }
  }

  double weight_decay_;
  double momentum_;
  std::vector<Group> groups_;
};

}  // namespace

std::unique_ptr<Optimizer> make_optimizer(const config::Config& config,
                                          const NamedTensors& parameters) {
  if (config.optimizer == config::OptimizerKind::sgd) {
    return std::make_unique<FusedSgd>(config, parameters);
  }
  return std::make_unique<FusedAdamW>(config, parameters);
}

}  // namespace ampt::train

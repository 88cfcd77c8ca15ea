#include "ampt/train/optimizer.h"

#include "ampt/kernels/fused_adamw.h"
#include "ampt/kernels/weight_copies.h"

#include <ATen/core/grad_mode.h>
#include <ATen/ops/_foreach_add.h>
#include <ATen/ops/_foreach_copy.h>
#include <ATen/ops/_foreach_sub.h>
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

  void append_named_state(const std::vector<StateKind>& kinds, NamedTensors& out) const {
    for (size_t k = 0; k < state.size(); ++k) {
      for (size_t i = 0; i < params.size(); ++i) {
        out.emplace_back(names[i] + "." + kinds[k].name, state[k][i]);
      }
    }
  }

  // The parameters that received a gradient this step, their gradients and their state:
  // a parameter unused by the forward pass has no gradient and is left alone, as in PyTorch.
  // With the half copies made of them so far (precision/half_weights.h; undefined: none),
  // which the step writes too.
  struct Live {
    std::vector<torch::Tensor> params;
    std::vector<torch::Tensor> grads;
    std::vector<std::vector<torch::Tensor>> state;
    std::vector<torch::Tensor> copies;
  };
  Live live() const {
    Live out;
    out.state.resize(state.size());
    for (size_t i = 0; i < params.size(); ++i) {
      if (!params[i].grad().defined()) continue;
      out.params.push_back(params[i]);
      out.grads.push_back(params[i].grad());
      for (size_t k = 0; k < state.size(); ++k) out.state[k].push_back(state[k][i]);
      out.copies.push_back(kernels::made_weight_copy(params[i]));
    }
    return out;
  }
};

// The decaying tensors first, then the others; empty groups are left out.
std::vector<Group> split_by_decay(OptimizerTensors tensors, double decay) {
  Group decaying{decay, {}, {}, {}};
  Group other{0.0, {}, {}, {}};
  decaying.state.resize(tensors.state.size());
  other.state.resize(tensors.state.size());
  for (size_t i = 0; i < tensors.params.size(); ++i) {
    auto& group = tensors.decay[i] ? decaying : other;
    group.names.push_back(std::move(tensors.names[i]));
    group.params.push_back(std::move(tensors.params[i]));
    for (size_t k = 0; k < tensors.state.size(); ++k) {
      group.state[k].push_back(std::move(tensors.state[k][i]));
    }
  }
  std::vector<Group> groups;
  for (auto* group : {&decaying, &other}) {
    if (!group->params.empty()) groups.push_back(std::move(*group));
  }
  return groups;
}

// A group's AdamW step counts, counted by one operation each way on the CPU when they are views
// of one storage (make_optimizer's whole parameters and ZeRO's pieces make them so). There
// _foreach_add_ and _foreach_sub_ dispatch once per count, 56 small operations a step for
// gpt-tiny's 28 parameters; on a GPU each is one launch already, and stays.
struct StepCounts {
  torch::Tensor storage;  // 1-dim over the counts' whole storage; undefined: count one by one
  torch::Tensor index;    // int64: each count's element of it
  torch::Tensor ones;

  static StepCounts of(const std::vector<torch::Tensor>& counts) {
    StepCounts out;
    if (counts.empty() || !counts.front().is_cpu()) return out;
    const auto& first = counts.front();
    std::vector<int64_t> index;
    for (const auto& c : counts) {
      if (c.dim() != 0 || !c.storage().is_alias_of(first.storage())) return out;
      index.push_back(c.storage_offset());
    }
    const auto elements = static_cast<int64_t>(first.storage().nbytes()) / first.element_size();
    out.storage = at::empty({0}, first.options()).set_(first.storage(), 0, {elements}, {1});
    out.index = torch::tensor(index, torch::dtype(torch::kInt64));
    out.ones = torch::ones({static_cast<int64_t>(index.size())}, first.options());
    return out;
  }
};

class FusedAdamW final : public Optimizer {
 public:
  FusedAdamW(const config::Config& config, OptimizerTensors tensors)
      : kinds_(optimizer_state_kinds(config)),
        weight_decay_(config.weight_decay),
        beta1_(config.adam_beta1),
        beta2_(config.adam_beta2),
        eps_(config.adam_eps),
        groups_(split_by_decay(std::move(tensors), config.weight_decay)) {
    for (const auto& group : groups_) counts_.push_back(StepCounts::of(group.state[2]));
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
    for (const auto& group : groups_) group.append_named_state(kinds_, out);
    return out;
  }

 private:
  // Lr: double or a device tensor, the two overloads of the fused kernel.
  template <class Lr>
  void step_with(const Lr& lr, const torch::Tensor& found_inf) {
    for (size_t g = 0; g < groups_.size(); ++g) {
      const auto& group = groups_[g];
      auto live = group.live();
      if (live.params.empty()) continue;
      auto& steps = live.state[2];
      // As torch.optim's fused path: count the step, let the kernel skip on found_inf, then
      // take the count back for skipped steps, all on the device.
      const auto& counts = counts_[g];
      const bool together = counts.storage.defined() && live.params.size() == group.params.size();
      if (together) {
        counts.storage.index_add_(0, counts.index, counts.ones);
      } else {
        at::_foreach_add_(steps, 1);
      }
      kernels::fused_adamw({live.params, live.grads, live.state[0], live.state[1], steps,
                            live.copies},
                           {beta1_, beta2_, group.weight_decay, eps_}, lr, found_inf);
      if (together) {
        counts.storage.index_add_(0, counts.index, found_inf.expand({counts.index.numel()}), -1);
      } else {
        at::_foreach_sub_(steps, std::vector<torch::Tensor>(steps.size(), found_inf));
      }
    }
  }

  std::vector<StateKind> kinds_;
  double weight_decay_;
  double beta1_;
  double beta2_;
  double eps_;
  std::vector<Group> groups_;
  std::vector<StepCounts> counts_;  // each group's
};

class FusedSgd final : public Optimizer {
 public:
  FusedSgd(const config::Config& config, OptimizerTensors tensors)
      : kinds_(optimizer_state_kinds(config)),
        weight_decay_(config.weight_decay),
        momentum_(config.momentum),
        groups_(split_by_decay(std::move(tensors), config.weight_decay)) {}

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
    for (const auto& group : groups_) group.append_named_state(kinds_, out);
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
      // SGD has no pass of ampt's own: the half copies follow in a second one (a skipped
      // step copies the unchanged weights).
      std::vector<torch::Tensor> copies, weights;
      for (size_t i = 0; i < live.copies.size(); ++i) {
        if (!live.copies[i].defined()) continue;
        copies.push_back(live.copies[i]);
        weights.push_back(live.params[i]);
      }
      if (!copies.empty()) {
        const at::NoGradGuard no_grad;  // the weights are leaves that train: nothing to record
        at::_foreach_copy_(copies, weights);
      }
    }
  }

  std::vector<StateKind> kinds_;
  double weight_decay_;
  double momentum_;
  std::vector<Group> groups_;
};

}  // namespace

std::vector<StateKind> optimizer_state_kinds(const config::Config& config) {
  if (config.optimizer == config::OptimizerKind::adamw) {
    return {{"exp_avg", true}, {"exp_avg_sq", true}, {"step", false}};
  }
  if (config.momentum == 0.0) return {};
  return {{"momentum_buffer", true}};
}

std::unique_ptr<Optimizer> make_optimizer(const config::Config& config, OptimizerTensors tensors) {
  if (config.optimizer == config::OptimizerKind::sgd) {
    return std::make_unique<FusedSgd>(config, std::move(tensors));
  }
  return std::make_unique<FusedAdamW>(config, std::move(tensors));
}

OptimizerTensors whole_parameters(const config::Config& config, const NamedTensors& parameters) {
  const auto kinds = optimizer_state_kinds(config);
  OptimizerTensors tensors;
  tensors.state.resize(kinds.size());
  // A per-parameter kind (AdamW's step count) as views of one tensor, which the optimizer can
  // count in one operation.
  std::vector<torch::Tensor> per_parameter(kinds.size());
  for (size_t k = 0; k < kinds.size() && !parameters.empty(); ++k) {
    if (kinds[k].per_element) continue;
    per_parameter[k] = torch::zeros({static_cast<int64_t>(parameters.size())},
                                    torch::dtype(torch::kFloat32).device(parameters.front().second.device()));
  }
  for (size_t i = 0; i < parameters.size(); ++i) {
    const auto& [name, p] = parameters[i];
    tensors.names.push_back(name);
    tensors.params.push_back(p);
    tensors.decay.push_back(p.dim() >= 2);
    for (size_t k = 0; k < kinds.size(); ++k) {
      tensors.state[k].push_back(kinds[k].per_element
                                     ? torch::zeros_like(p, torch::MemoryFormat::Preserve)
                                     : per_parameter[k].select(0, static_cast<int64_t>(i)));
    }
  }
  return tensors;
}

std::unique_ptr<Optimizer> make_optimizer(const config::Config& config,
                                          const NamedTensors& parameters) {
  return make_optimizer(config, whole_parameters(config, parameters));
}

}  // namespace ampt::train

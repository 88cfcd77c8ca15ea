#include "ampt/precision/master_weights.h"

#include "ampt/precision/placeholder.h"

#include <ATen/ops/_foreach_copy.h>

#include <stdexcept>
#include <string>

namespace ampt::precision {

MasterWeights::MasterWeights(torch::nn::Module& module, bool enabled,
                             const std::function<bool(const std::string&)>& keep_fp32)
    : keep_fp32_(keep_fp32), enabled_(enabled) {
  for (const auto& item : module.named_parameters()) {
    if (!item.value().requires_grad()) {
      frozen_.emplace_back(item.key(), item.value());
      continue;
    }
    Entry entry{item.key(), item.value(), item.value(), false};
    if (enabled_ && entry.param.is_floating_point() && !keep_fp32(entry.name)) {
      // fp32 until set_dtype: the master is the parameter's storage under another handle.
      entry.separate = true;
      entry.master = entry.param.detach();
    }
    entries_.push_back(std::move(entry));
  }
}

void MasterWeights::require_masters(const char* what) const {
  if (released_) throw std::logic_error(std::string("MasterWeights::") + what + " after release_masters");
}

void MasterWeights::release_masters() {
  if (!enabled_) return;
  for (auto& e : entries_) {
    if (e.separate) e.master = torch::Tensor();
  }
  released_ = true;
}

NamedTensors MasterWeights::masters() const {
  require_masters("masters");
  NamedTensors out;
  out.reserve(entries_.size());
  for (const auto& e : entries_) out.emplace_back(e.name, e.master);
  return out;
}

void MasterWeights::set_dtype(c10::ScalarType dtype) {
  if (!enabled_ || dtype == dtype_) return;
  require_masters("set_dtype");
  torch::NoGradGuard no_grad;
  for (auto& e : entries_) {
    if (!e.separate) continue;
    e.param.mutable_grad() = torch::Tensor();
    e.master.mutable_grad() = torch::Tensor();
    // set_data keeps the parameter's identity: modules, autograd and the caller's handles see it.
    e.param.set_data(dtype == torch::kFloat ? e.master : e.master.to(dtype));
  }
  dtype_ = dtype;
}

void MasterWeights::store_frozen(c10::ScalarType dtype) {
  torch::NoGradGuard no_grad;
  for (auto& [name, param] : frozen_) {
    if (param.is_floating_point() && !keep_fp32_(name)) {
      param.set_data(moved(param, param.device(), dtype));
    }
  }
}

std::vector<torch::Tensor> MasterWeights::master_grads() {
  require_masters("master_grads");
  std::vector<torch::Tensor> grads;
  std::vector<torch::Tensor> half_grads;
  std::vector<torch::Tensor> fp32_grads;
  for (auto& e : entries_) {
    const auto& grad = e.param.grad();
    if (!grad.defined()) continue;
    if (!e.separate) {
      grads.push_back(grad);
    } else if (dtype_ == torch::kFloat) {
      // The parameter shares the master's storage: its gradient is the master's as it is.
      e.master.mutable_grad() = grad;
      grads.push_back(grad);
    } else {
      e.master.mutable_grad() = torch::empty_like(e.master);
      half_grads.push_back(grad);
      fp32_grads.push_back(e.master.grad());
      grads.push_back(e.master.grad());
      // The half gradient is not needed past the copy (stream order keeps its memory alive
      // until then): dropping it here is what keeps O2 at 16 bytes per parameter
      // (docs/precision.md, opt levels).
      e.param.mutable_grad() = torch::Tensor();
    }
  }
  if (!half_grads.empty()) at::_foreach_copy_(fp32_grads, half_grads);
  return grads;
}

void MasterWeights::refresh_model() {
  if (!enabled_ || dtype_ == torch::kFloat) return;
  require_masters("refresh_model");
  std::vector<torch::Tensor> params;
  std::vector<torch::Tensor> masters;
  for (auto& e : entries_) {
    if (!e.separate) continue;
    e.master.mutable_grad() = torch::Tensor();  // fp32 gradients live only through the step
    params.push_back(e.param);
    masters.push_back(e.master);
  }
  if (params.empty()) return;
  torch::NoGradGuard no_grad;
  at::_foreach_copy_(params, masters);
}

}  // namespace ampt::precision

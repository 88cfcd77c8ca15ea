// The stand-in a frozen parameter keeps when its values live elsewhere (a quantized base's
// storage, or values a checkpoint is yet to give): its shape over one element, so that parameter
// counts, names and shapes stay as they were while it holds no memory.
#pragma once

#include <torch/nn/module.h>
#include <torch/types.h>

namespace ampt::precision {

inline torch::Tensor placeholder(c10::IntArrayRef sizes, const torch::TensorOptions& options) {
  return torch::zeros({1}, options).expand(sizes);
}

// Whether `t` is a placeholder: more elements than its storage holds.
inline bool is_placeholder(const torch::Tensor& t) {
  return t.defined() && t.numel() > 1 &&
         t.storage().nbytes() < static_cast<size_t>(t.numel()) * t.element_size();
}

// `t` in `dtype` and on `device`, a placeholder staying one (Tensor::to would fill it out).
inline torch::Tensor moved(const torch::Tensor& t, const c10::Device& device,
                           c10::ScalarType dtype) {
  if (is_placeholder(t)) return placeholder(t.sizes(), t.options().device(device).dtype(dtype));
  return t.to(device, dtype);
}

// module->to(device), a placeholder parameter moving as one (Module::to would fill it out).
inline void move_to(torch::nn::Module& module, const c10::Device& device) {
  torch::NoGradGuard no_grad;
  for (auto& p : module.parameters()) p.set_data(moved(p, device, p.scalar_type()));
  for (auto& b : module.buffers()) b.set_data(b.to(device));
}

// Every frozen floating parameter of `module` a placeholder of its shape and dtype: a LoRA base
// whose values a checkpoint gives is never whole in fp32 (its Linear weights never were,
// models::DeferredWeights).
inline void defer_frozen_parameters(torch::nn::Module& module) {
  torch::NoGradGuard no_grad;
  for (auto& p : module.parameters()) {
    if (!p.requires_grad() && p.is_floating_point() && !is_placeholder(p)) {
      p.set_data(placeholder(p.sizes(), p.options()));
    }
  }
}

}  // namespace ampt::precision

#include "ampt/train/grad_clip.h"

#include "ampt/kernels/gradient_pass.h"
#include "ampt/precision/stability_monitor.h"

namespace ampt::train {

torch::Tensor grad_norms(const std::vector<torch::Tensor>& grads) {
  return kernels::gradient_norms(grads);
}

torch::Tensor total_grad_norm_of(const torch::Tensor& norms) {
  return torch::linalg_vector_norm(norms, 2);
}

torch::Tensor any_nonfinite(const torch::Tensor& norms) {
  return precision::nonfinite_norms(norms).any().to(torch::kFloat32);
}

torch::Tensor total_grad_norm(const std::vector<torch::Tensor>& grads) {
  return total_grad_norm_of(grad_norms(grads));
}

torch::Tensor clip_grad_norm_(const std::vector<torch::Tensor>& grads, double max_norm) {
  return clip_grad_norm_(grads, max_norm, grad_norms(grads));
}

torch::Tensor clip_grad_norm_(const std::vector<torch::Tensor>& grads, double max_norm,
                              const torch::Tensor& norms) {
  auto norm = total_grad_norm_of(norms);
  const auto coefficient = (max_norm / (norm + 1e-6)).clamp_max(1.0);
  kernels::scale_gradients_(grads, coefficient);
  return norm;
}

}  // namespace ampt::train

#include "ampt/train/grad_clip.h"

#include <ATen/ops/_foreach_mul.h>
#include <ATen/ops/_foreach_norm.h>

namespace ampt::train {

torch::Tensor total_grad_norm(const std::vector<torch::Tensor>& grads) {
  const auto norms = at::_foreach_norm(grads, 2);
  return torch::linalg_vector_norm(torch::stack(norms).to(torch::kFloat32), 2);
}

torch::Tensor clip_grad_norm_(const std::vector<torch::Tensor>& grads, double max_norm) {
  auto norm = total_grad_norm(grads);
  const auto coefficient = (max_norm / (norm + 1e-6)).clamp_max(1.0);
  at::_foreach_mul_(grads, coefficient);
  return norm;
}

}  // namespace ampt::train

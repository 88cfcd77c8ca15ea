#include "ampt/precision/half_weights.h"

#include "ampt/kernels/weight_copies.h"

#include <ATen/core/grad_mode.h>
#include <ATen/ops/_foreach_copy.h>

namespace ampt::precision {

HalfWeights::HalfWeights(std::vector<torch::Tensor> parameters, bool fp32_grad)
    : parameters_(std::move(parameters)), fp32_grad_(fp32_grad) {
  std::erase_if(parameters_, [](const torch::Tensor& p) {
    return !p.requires_grad() || p.scalar_type() != c10::kFloat;
  });
}

HalfWeights::~HalfWeights() { set_dtype(c10::kFloat); }

void HalfWeights::set_dtype(c10::ScalarType dtype) {
  if (dtype == dtype_) return;
  dtype_ = dtype;
  for (const auto& p : parameters_) {
    if (dtype == c10::kFloat) {
      kernels::forbid_weight_copy(p);
    } else {
      kernels::allow_weight_copy(p, dtype, fp32_grad_);
    }
  }
}

void HalfWeights::refresh() {
  std::vector<torch::Tensor> copies, weights;
  for (const auto& p : parameters_) {
    if (auto copy = kernels::made_weight_copy(p); copy.defined()) {
      copies.push_back(std::move(copy));
      weights.push_back(p);
    }
  }
  if (copies.empty()) return;
  const at::NoGradGuard no_grad;
  at::_foreach_copy_(copies, weights);
}

}  // namespace ampt::precision

#include "ampt/precision/grad_underflow.h"

namespace ampt::precision {

torch::Tensor underflow_counts(const std::vector<torch::Tensor>& grads, c10::ScalarType half) {
  auto options = torch::dtype(torch::kFloat64);
  if (!grads.empty()) options = options.device(grads.front().device());
  auto counts = torch::zeros({2}, options);
  for (const auto& grad : grads) {
    const auto nonzero = grad.ne(0);
    const auto underflow = nonzero.logical_and(grad.to(half).eq(0));
    counts[0].add_(underflow.sum());
    counts[1].add_(nonzero.sum());
  }
  return counts;
}

}  // namespace ampt::precision

// Gradient norm and clipping without a host synchronisation.
#pragma once

#include <torch/types.h>

#include <vector>

namespace ampt::train {

// Global L2 norm of all gradients, as a 0-dim float32 device tensor.
torch::Tensor total_grad_norm(const std::vector<torch::Tensor>& grads);

// Each gradient's L2 norm, as a 1-dim float32 device tensor: computed once per step and shared
// by clipping and the stability monitor (a non-finite norm marks a non-finite gradient).
torch::Tensor grad_norms(const std::vector<torch::Tensor>& grads);
// The global norm from grad_norms' result (identical to total_grad_norm).
torch::Tensor total_grad_norm_of(const torch::Tensor& norms);
// From grad_norms' result: a 0-dim float32 tensor, 1 when a gradient holds inf or NaN, else 0 (the
// found_inf that fused optimizers skip on). A gradient of finite values whose squares overflow
// fp32 (elements beyond ~1e19) counts as non-finite too.
torch::Tensor any_nonfinite(const torch::Tensor& norms);

// Scales the gradients so their global norm is at most max_norm (torch.nn.utils.clip_grad_norm_'s
// rule: coefficient max_norm / (norm + 1e-6), capped at 1) and returns the norm before clipping.
// The coefficient stays on the device, so clipping costs no synchronisation.
torch::Tensor clip_grad_norm_(const std::vector<torch::Tensor>& grads, double max_norm);
// The same with the per-gradient norms already computed.
torch::Tensor clip_grad_norm_(const std::vector<torch::Tensor>& grads, double max_norm,
                              const torch::Tensor& norms);

}  // namespace ampt::train

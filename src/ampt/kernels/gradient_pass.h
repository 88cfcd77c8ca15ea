// The step's passes over every gradient, each gradient's L2 norm and the clip's scaling, as one
// operation each on the CPU. ATen's foreach operations on a CPU dispatch one operation per
// gradient (for gpt-tiny 28 norms and 28 multiplications a step, mostly dispatch at its sizes);
// here one loop reads the gradients' memory. Elsewhere (a GPU, half or strided gradients) they are
// ATen's foreach operations, one launch each on a GPU already.
#pragma once

#include <torch/types.h>

#include <vector>

namespace ampt::kernels {

// float32 [n] on the gradients' device: the L2 norm of each gradient, as at::_foreach_norm's. A
// gradient holding inf or NaN has a non-finite norm, and so does one of finite values whose
// squares overflow float32 (elements beyond ~1e19), as ATen's. On the CPU the squares are summed
// in float lanes over fixed chunks of each gradient, the chunks' sums then in order: the same
// result at any thread count.
torch::Tensor gradient_norms(const std::vector<torch::Tensor>& grads);

// Multiplies every gradient by `coefficient` (0-dim, float32, on their device) in place, as
// at::_foreach_mul_.
void scale_gradients_(const std::vector<torch::Tensor>& grads, const torch::Tensor& coefficient);

// Whether the CPU pass takes these gradients: contiguous float32 CPU tensors, at least one.
bool cpu_gradient_pass(const std::vector<torch::Tensor>& grads);

}  // namespace ampt::kernels

// The half-precision copies of fp32 weights that an O1 run computes with (precision/half_weights
// decides which weights may have one; the optimizer step writes them, fused_adamw.h): a Linear
// whose weight has a copy reads the copy instead of casting the weight in every forward, and
// takes the weight's gradient in fp32 (fused_linear.h). A copy is made the first time a matmul
// under autocast asks for it, so exactly the weights the matmuls read have one (not a norm, an
// fp8 layer, a weight in an fp32 island or an embedding read as a table). Keyed by the weight
// itself (its TensorImpl).
#pragma once

#include <torch/types.h>

namespace ampt::kernels {

// From now on fp32 `weight` may have a copy in `dtype` (a half dtype), made when a matmul under
// autocast in that dtype first reads it; `fp32_grad` says whether the Linears that read it take
// the weight's gradient in fp32 from the GEMM (fp32_gemm.h) or as autocast's path makes it (a
// half gradient, then cast). A copy of another dtype is dropped.
void allow_weight_copy(const torch::Tensor& weight, c10::ScalarType dtype, bool fp32_grad);
// No copy for `weight` from now on; one made is dropped.
void forbid_weight_copy(const torch::Tensor& weight);

struct WeightCopy {
  torch::Tensor copy;  // undefined: none applies
  bool fp32_grad = false;
};

// What a matmul reads for `weight` (an allowed weight, or a view of one: the same view of its
// copy) when autocast is on for its device in the allowed dtype, the copy made now if it was not
// yet; an undefined copy otherwise, where autocast's own cast (or none) applies.
WeightCopy weight_copy(const torch::Tensor& weight);

// The copy made so far for `weight`, whatever autocast says now, or undefined: what an optimizer
// step writes.
torch::Tensor made_weight_copy(const torch::Tensor& weight);

}  // namespace ampt::kernels

// The residual stream's add and the LayerNorm that reads it, as one operation: sum = residual +
// branch and normed = layer_norm(sum), with normed already in the dtype the next matmul reads.
// Unfused, a transformer block makes three passes (the add, the norm, autocast's cast of the
// norm's fp32 output) and three more in backward (the norm's backward, the cast's, the sum of the
// residual gradients); on CUDA this is one kernel forward and two backward (cuda/launch.h).
#pragma once

#include <torch/types.h>

namespace ampt::kernels {

struct AddLayerNormResult {
  torch::Tensor sum;     // residual + branch, in their promoted dtype: the stream goes on with it
  torch::Tensor normed;  // layer_norm(sum), in autocast's dtype when autocast is on for the
                         // device, else in layer_norm's own
};

// residual and branch [..., C] of one shape; weight and bias [C]. Gradients flow to all four.
// The statistics and the normalisation are float32 whatever the dtypes. On CUDA, for the dtype
// combinations of cuda::AddLayerNormLayout on contiguous inputs, the kernels; anything else (and
// every CPU) runs add_layer_norm_reference.
AddLayerNormResult add_layer_norm(const torch::Tensor& residual, const torch::Tensor& branch,
                                  const torch::Tensor& weight, const torch::Tensor& bias,
                                  double eps);

// The unfused computation, with autograd's own backward: ATen's add, then layer_norm in float32
// (as autocast runs it) and the cast to the dtype `normed` has in add_layer_norm.
AddLayerNormResult add_layer_norm_reference(const torch::Tensor& residual,
                                            const torch::Tensor& branch,
                                            const torch::Tensor& weight, const torch::Tensor& bias,
                                            double eps);

}  // namespace ampt::kernels

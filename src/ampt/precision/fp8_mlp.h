// A transformer's MLP, c_proj(gelu(c_fc(x))) with GPT-2's tanh GELU, with both Linears in fp8 as
// one autograd operation. The GELU runs inside the cast of c_proj's input and its gradient inside
// the cast of c_fc's output gradient (kernels::Fp8CastSpec's prologues; TransformerEngine's
// LayerNormMLP fuses the same), so neither the GELU's output nor its input's gradient is ever
// written in bfloat16: two passes over a [tokens, 4·width] tensor fewer in forward and two in
// backward than the two Fp8Linear layers with at::gelu between them, and the bias gradients come
// from the casts of the output gradients. It keeps what those layers would: c_fc's output in
// bfloat16 (the GELU's input) and the transposed fp8 copies the weight and input gradients read.
#pragma once

#include "ampt/kernels/gelu_mlp.h"
#include "ampt/precision/fp8_linear.h"

#include <torch/types.h>

namespace ampt::precision {

// x [..., width] → [..., width] in bfloat16, c_fc's scaling states in `fc` and c_proj's in `proj`
// (`record` as Fp8Linear::forward's; the autograd node shares both states). Gradients flow to x
// and the four weights, in their dtypes.
torch::Tensor fp8_gelu_mlp(const torch::Tensor& x, const kernels::GeluMlpWeights& weights,
                           const c10::intrusive_ptr<Fp8Linear>& fc,
                           const c10::intrusive_ptr<Fp8Linear>& proj, bool record);

}  // namespace ampt::precision

// fp8 Linear layers: e4m3 inputs and weights in forward, e5m2 gradients in backward (e4m3 with
// row-wise scales), through at::_scaled_mm with scales kept on the device.
#pragma once

#include "ampt/config/config.h"
#include "ampt/kernels/fp8_quantize.h"

#include <ATen/core/ivalue.h>
#include <torch/types.h>

#include <optional>

namespace ampt::precision {

// TransformerEngine's DelayedScaling recipe in its HYBRID format (e4m3 forward, e5m2 backward),
// or per-tensor current scaling, or TorchAO's row-wise recipe.
struct Fp8Recipe {
  config::Fp8Scaling scaling = config::Fp8Scaling::delayed;
  int64_t amax_history_len = 1024;
  config::Fp8AmaxAlgo amax_compute_algo = config::Fp8AmaxAlgo::max;
  int64_t margin = 0;
};

Fp8Recipe fp8_recipe(const config::Config& config);

// The scale of one tensor role (a layer's input, weight or output gradient), as
// TransformerEngine keeps it, with its quantisation (kernels/fp8_quantize.h):
// - delayed: a call quantises with the scale computed after the previous call, fp8_max / amax /
//   2^margin with amax the max (or the most recent) of the amaxes of the last amax_history_len
//   calls; an unusable one (amax 0 or non-finite) keeps the scale before it. One pass over the
//   tensor on a GPU casts, transposes and records the amax and the next scale on the device.
//   Unlike TransformerEngine, the first recorded call (of a fresh run or a resumed one: the
//   history is not checkpointed) scales from its own amax, in one more pass, instead of from 1.
// - current: every call from its own amax: a reduction pass, then the cast pass, the scale
//   passed between them on the device.
// - rowwise: one power-of-two scale per row of each copy from its own amax (e4m3 throughout):
//   an amax pass, then the cast pass.
// Nothing is read by the host: no synchronisation, capturable in a CUDA graph.
class Fp8TensorScaling {
 public:
  Fp8TensorScaling(const Fp8Recipe& recipe, c10::ScalarType fp8_dtype);

  // What `spec` asks for of t [rows, cols] (kernels::cast_fp8: the copies, column sums, and a
  // prologue whose values are quantised, their amax recorded). `record`: update the scale state
  // and the history; a recomputation (activation checkpointing) passes false and reuses the
  // scale its first pass used.
  kernels::Fp8Cast quantize(const torch::Tensor& t, bool record,
                            const kernels::Fp8CastSpec& spec = {});

  c10::ScalarType dtype() const { return format_.dtype; }
  // The scale the latest recorded call used (0-dim float32); undefined before the first call,
  // which allocates the state on its tensor's device, and for rowwise scaling.
  torch::Tensor scale() const;
  // The recorded amaxes, [0] the latest (reads the device: for inspection).
  torch::Tensor amax_history() const { return state_ ? state_->ordered() : torch::Tensor(); }

 private:
  Fp8Recipe recipe_;
  kernels::Fp8Format format_;
  std::optional<kernels::Fp8History> state_;
  bool primed_ = false;  // delayed: a call has set the scale from its own amax
};

// The scaling state of one Linear layer run in fp8. Shared (intrusive_ptr) between the module
// that owns it and the autograd nodes of the steps in flight.
class Fp8Linear : public torch::CustomClassHolder {
 public:
  explicit Fp8Linear(const Fp8Recipe& recipe);

  // x · weightᵀ + bias for x [..., in], weight [out, in], bias [out] → [..., out] in bf16.
  // Gradients: x's in x's dtype, weight's and bias's in float32 (the master weights' dtype
  // when they are float32). in, out and x's row count must be multiples of 16 on a GPU.
  // Forward keeps only the transposed fp8 copies of x and the weight for backward, which reads
  // them as they are: dx = dy · W from Wᵀ, dW = dyᵀ · x from xᵀ (no transposing pass); the bias's
  // gradient comes from the pass that quantises dy (kernels::cast_fp8's column sums). The
  // forward GEMM uses cuBLASLt's fast accumulation, the backward ones do not (as
  // TransformerEngine: gradients sum over many more terms).
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& weight,
                        const torch::Tensor& bias, bool record);

  Fp8TensorScaling input;        // e4m3
  Fp8TensorScaling weight;       // e4m3
  Fp8TensorScaling grad_output;  // e5m2
};

// A quantised copy kept for a backward GEMM, with the factors that dequantise it.
struct Fp8Saved {
  torch::Tensor data, inverse;
};

// An fp8 Linear's three GEMMs, for Fp8Linear and for operations that chain fp8 Linears with the
// work between them in the casts (precision/fp8_mlp.h):
// - forward: x·Wᵀ + bias [rows, out] in bfloat16 from x's and W's row-major copies, with
//   cuBLASLt's fast accumulation;
// - the input gradient dy·W [rows, in] in `dtype` from dy's row-major copy and Wᵀ's;
// - the weight gradient dyᵀ·x [out, in] in float32 (bfloat16 for row-wise factors) from dy's
//   transposed copy and xᵀ's.
torch::Tensor fp8_forward_gemm(const kernels::Fp8Cast& xq, const kernels::Fp8Cast& wq,
                               const torch::Tensor& bias);
torch::Tensor fp8_input_grad(const kernels::Fp8Cast& g, const Fp8Saved& w_t, c10::ScalarType dtype);
torch::Tensor fp8_weight_grad(const kernels::Fp8Cast& g, const Fp8Saved& x_t);

}  // namespace ampt::precision

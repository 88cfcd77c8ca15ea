// fp8 Linear layers: e4m3 inputs and weights in forward, e5m2 gradients in backward, through
// at::_scaled_mm with per-tensor scales kept on the device (delayed or current scaling).
#pragma once

#include "ampt/config/config.h"

#include <ATen/core/ivalue.h>
#include <torch/types.h>

#include <utility>

namespace ampt::precision {

// TransformerEngine's DelayedScaling recipe in its HYBRID format (e4m3 forward, e5m2 backward).
struct Fp8Recipe {
  config::Fp8Scaling scaling = config::Fp8Scaling::delayed;
  int64_t amax_history_len = 1024;
  config::Fp8AmaxAlgo amax_compute_algo = config::Fp8AmaxAlgo::max;
  int64_t margin = 0;
};

Fp8Recipe fp8_recipe(const config::Config& config);

// The largest finite value of an fp8 dtype: 448 (e4m3fn), 57344 (e5m2).
double fp8_max(c10::ScalarType fp8_dtype);

// round(clamp(t · scale, ±fp8_max)) in `fp8_dtype`; saturating, so a stale delayed scale clips
// outliers instead of making inf.
torch::Tensor quantize_fp8(const torch::Tensor& t, const torch::Tensor& scale,
                           c10::ScalarType fp8_dtype);

// The scale of one tensor role (a layer's input, weight or output gradient), as
// TransformerEngine keeps it. Delayed: the scale for a call is fp8_max / amax / 2^margin with
// amax the max (or the most recent) of the amaxes recorded by the previous amax_history_len
// calls; amax ≤ 0 or non-finite keeps the previous scale. One difference: while the history is
// still all zero (a fresh run or a resumed one, the history is not checkpointed) the call scales
// from its own amax instead of starting at scale 1. Current: every call from its own amax.
// All of it stays on the device: no host synchronisation, capturable in a CUDA graph.
class Fp8TensorScaling {
 public:
  Fp8TensorScaling(const Fp8Recipe& recipe, c10::ScalarType fp8_dtype);

  // Returns t quantised and the inverse scale (0-dim float32) that dequantises it. `record`:
  // update the delayed scale and write amax(t) into the history; a recomputation (activation
  // checkpointing) passes false and reuses the scale its first pass used.
  std::pair<torch::Tensor, torch::Tensor> quantize(const torch::Tensor& t, bool record);

  c10::ScalarType dtype() const { return dtype_; }
  // Undefined until the first call, which allocates them on its tensor's device.
  const torch::Tensor& scale() const { return scale_; }
  const torch::Tensor& amax_history() const { return history_; }  // [0]: the latest call's

 private:
  Fp8Recipe recipe_;
  c10::ScalarType dtype_;
  double max_;
  torch::Tensor scale_;    // 0-dim float32
  torch::Tensor history_;  // [amax_history_len] float32
};

// The scaling state of one Linear layer run in fp8. Shared (intrusive_ptr) between the module
// that owns it and the autograd nodes of the steps in flight.
class Fp8Linear : public torch::CustomClassHolder {
 public:
  explicit Fp8Linear(const Fp8Recipe& recipe);

  // x · weightᵀ + bias for x [..., in], weight [out, in], bias [out] → [..., out] in bf16.
  // Gradients: x's in x's dtype, weight's and bias's in float32 (the master weights' dtype
  // when they are float32). in, out and x's row count must be multiples of 16 on a GPU.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& weight,
                        const torch::Tensor& bias, bool record);

  Fp8TensorScaling input;        // e4m3
  Fp8TensorScaling weight;       // e4m3
  Fp8TensorScaling grad_output;  // e5m2
};

}  // namespace ampt::precision

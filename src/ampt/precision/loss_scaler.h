// Dynamic loss scaling with exactly torch.amp.GradScaler's semantics, kept on the device.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <vector>

namespace ampt::precision {

struct LossScalerOptions {
  bool enabled = true;  // false: scale fixed at 1 and never updated (bf16, fp32)
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
};

// Host copy of the scaler's state, for checkpoints and logs.
struct LossScalerState {
  float scale = 1.0F;
  int32_t growth_tracker = 0;
};

// The scale and growth tracker live in device tensors so that neither the skip decision nor the
// update needs a host synchronisation; the ATen kernels `_amp_foreach_non_finite_check_and_unscale_`
// and `_amp_update_scale_` are the ones torch.amp.GradScaler calls, so trajectories match it
// bit for bit. A disabled scaler still checks gradients for inf/NaN, so every precision can
// skip a non-finite step.
class LossScaler {
 public:
  LossScaler(const LossScalerOptions& options, const torch::Device& device);

  bool enabled() const { return options_.enabled; }
  const LossScalerOptions& options() const { return options_; }

  // loss * scale when enabled, else the loss itself.
  torch::Tensor scale(const torch::Tensor& loss) const;

  // Multiplies every gradient by 1/scale in place (once per optimizer step, after all
  // accumulation micro-batches) and returns a 0-dim float tensor on the device: 1 when any
  // gradient element is inf or NaN, else 0.
  torch::Tensor unscale_(const std::vector<torch::Tensor>& grads) const;

  // Backs off and resets the tracker when found_inf is 1; grows after growth_interval clean steps.
  void update(const torch::Tensor& found_inf);

  // Reads the device state (a host synchronisation: call on log steps only).
  LossScalerState state() const;
  void load_state(const LossScalerState& state);

 private:
  LossScalerOptions options_;
  torch::Tensor scale_;           // 0-dim float32
  torch::Tensor growth_tracker_;  // 0-dim int32
};

}  // namespace ampt::precision

// Loss scaling kept on the device: torch.amp.GradScaler's dynamic rules bit for bit (the
// default), DeepSpeed's DynamicLossScaler rules (hysteresis), an optional floor and ceiling, or a
// fixed scale.
#pragma once

#include "ampt/config/config.h"

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
  config::ScalerRules rules = config::ScalerRules::torch;
  double static_scale = 0.0;  // > 0: the scale, never updated
  int64_t hysteresis = 1;     // deepspeed rules: overflows before a backoff
  bool consecutive_hysteresis = false;
  double min_scale = 0.0;  // 0: no floor
  double max_scale = 0.0;  // 0: no ceiling
};

// The scaler part of a resolved configuration; `enabled` says whether the precision scales.
LossScalerOptions scaler_options(const config::Config& config, bool enabled);

// Host copy of the scaler's state, for checkpoints and logs.
struct LossScalerState {
  float scale = 1.0F;
  int32_t growth_tracker = 0;  // torch: clean steps since growth or overflow; deepspeed: since overflow
  int32_t hysteresis = 0;      // deepspeed rules: overflows left before a backoff; 0: unknown (full)
};

// The scale, growth tracker and hysteresis live in device tensors so that neither the skip
// decision nor the update needs a host synchronisation. Under torch rules without a floor or
// ceiling the update is the ATen kernel torch.amp.GradScaler calls (`_amp_update_scale_`), so
// trajectories match it bit for bit; unscaling always uses its
// `_amp_foreach_non_finite_check_and_unscale_`. A disabled scaler's unscale_ still checks
// gradients for inf/NaN; the training step skips that pass and finds them from the gradient norms
// (train/grad_clip.h), so every precision can skip a non-finite step.
class LossScaler {
 public:
  // UsageError for contradictory settings (hysteresis under torch rules, a floor above the
  // initial scale ...).
  LossScaler(const LossScalerOptions& options, const torch::Device& device);

  bool enabled() const { return options_.enabled; }
  bool dynamic() const { return options_.enabled && options_.static_scale <= 0.0; }
  const LossScalerOptions& options() const { return options_; }

  // loss * scale when enabled, else the loss itself.
  torch::Tensor scale(const torch::Tensor& loss) const;

  // Multiplies every gradient by 1/scale in place (once per optimizer step, after all
  // accumulation micro-batches) and returns a 0-dim float tensor on the device: 1 when any
  // gradient element is inf or NaN, else 0.
  torch::Tensor unscale_(const std::vector<torch::Tensor>& grads) const;

  // Applies one step's found_inf (0 or 1) to the scale. Returns a 0-dim float device tensor that
  // is 1 when this overflow should have backed off but the scale already sat at min_scale
  // (DeepSpeed's "Current loss scale already at minimum"); undefined when there is no floor.
  torch::Tensor update(const torch::Tensor& found_inf);

  // Reads the device state (a host synchronisation: call on log steps only).
  LossScalerState state() const;
  void load_state(const LossScalerState& state);

 private:
  void update_deepspeed(const torch::Tensor& overflow);

  LossScalerOptions options_;
  torch::Tensor scale_;           // 0-dim float32
  torch::Tensor growth_tracker_;  // 0-dim int32
  torch::Tensor hysteresis_;      // 0-dim int32, deepspeed rules only
};

}  // namespace ampt::precision

#include "ampt/precision/loss_scaler.h"

#include "ampt/core/errors.h"

#include <ATen/ops/_amp_foreach_non_finite_check_and_unscale.h>
#include <ATen/ops/_amp_update_scale.h>
#include <fmt/format.h>

#include <map>

namespace ampt::precision {
namespace {

void check(const LossScalerOptions& o) {
  if (o.rules == config::ScalerRules::torch && (o.hysteresis != 1 || o.consecutive_hysteresis)) {
    throw UsageError(fmt::format(
        "hysteresis {}{} needs grad_scaler_rules deepspeed: torch.amp.GradScaler backs off on "
        "every overflow",
        o.hysteresis, o.consecutive_hysteresis ? " with consecutive_hysteresis" : ""));
  }
  if (o.min_scale > 0.0 && o.max_scale > 0.0 && o.min_scale > o.max_scale) {
    throw UsageError(fmt::format("min_loss_scale {} is above max_loss_scale {}", o.min_scale,
                                 o.max_scale));
  }
  if (o.static_scale > 0.0) return;
  if (o.min_scale > 0.0 && o.init_scale < o.min_scale) {
    throw UsageError(fmt::format("grad_scaler_init {} is below min_loss_scale {}", o.init_scale,
                                 o.min_scale));
  }
  if (o.max_scale > 0.0 && o.init_scale > o.max_scale) {
    throw UsageError(fmt::format("grad_scaler_init {} is above max_loss_scale {}", o.init_scale,
                                 o.max_scale));
  }
}

double initial_scale(const LossScalerOptions& o) {
  if (!o.enabled) return 1.0;
  return o.static_scale > 0.0 ? o.static_scale : o.init_scale;
}

}  // namespace

LossScalerOptions scaler_options(const config::Config& config, bool enabled) {
  LossScalerOptions o;
  o.enabled = enabled && config.grad_scaler_enabled;
  o.init_scale = config.grad_scaler_init;
  o.growth_factor = config.grad_scaler_growth_factor;
  o.backoff_factor = config.grad_scaler_backoff;
  o.growth_interval = config.grad_scaler_growth_interval;
  o.rules = config.grad_scaler_rules;
  o.static_scale = config.loss_scale;
  o.hysteresis = config.hysteresis;
  o.consecutive_hysteresis = config.consecutive_hysteresis;
  o.min_scale = config.min_loss_scale;
  o.max_scale = config.max_loss_scale;
  return o;
}

LossScaler::LossScaler(const LossScalerOptions& options, const torch::Device& device)
    : options_(options),
      scale_(torch::full({}, initial_scale(options), torch::dtype(torch::kFloat32).device(device))),
      growth_tracker_(torch::zeros({}, torch::dtype(torch::kInt32).device(device))),
      hysteresis_(torch::full({}, options.hysteresis, torch::dtype(torch::kInt32).device(device))) {
  check(options_);
}

torch::Tensor LossScaler::scale(const torch::Tensor& loss) const {
  if (!options_.enabled) return loss;
  return loss * scale_.to(loss.device(), /*non_blocking=*/true);
}

torch::Tensor LossScaler::unscale_(const std::vector<torch::Tensor>& grads) const {
  // GradScaler computes the reciprocal in double, then rounds to float: do the same so the
  // unscaled gradients are bit-identical.
  const auto inv_scale = scale_.to(torch::kFloat64).reciprocal().to(torch::kFloat32);
  auto found_inf = torch::zeros({}, scale_.options());
  // The fused kernel wants one device and dtype per call, as GradScaler groups them.
  std::map<std::pair<std::string, c10::ScalarType>, std::vector<torch::Tensor>> groups;
  for (const auto& grad : grads) {
    if (grad.defined()) groups[{grad.device().str(), grad.scalar_type()}].push_back(grad);
  }
  for (auto& [key, group] : groups) {
    auto group_found_inf = torch::zeros({}, scale_.options().device(group.front().device()));
    at::_amp_foreach_non_finite_check_and_unscale_(
        group, group_found_inf, inv_scale.to(group.front().device(), /*non_blocking=*/true));
    found_inf.add_(group_found_inf.to(found_inf.device(), /*non_blocking=*/true));
  }
  return found_inf.clamp_max_(1.0);
}

torch::Tensor LossScaler::update(const torch::Tensor& found_inf) {
  if (!dynamic()) return {};
  const auto overflow = found_inf.gt(0.0);
  torch::Tensor floor_hit;
  if (options_.rules == config::ScalerRules::deepspeed) {
    // DeepSpeed only backs off (and only then checks its floor) once hysteresis is used up.
    if (options_.min_scale > 0.0) {
      floor_hit = (overflow & hysteresis_.le(1) & scale_.le(options_.min_scale)).to(torch::kFloat32);
    }
    update_deepspeed(overflow);
    return floor_hit;
  }
  if (options_.min_scale > 0.0) {
    floor_hit = (overflow & scale_.le(options_.min_scale)).to(torch::kFloat32);
  }
  at::_amp_update_scale_(scale_, growth_tracker_, found_inf, options_.growth_factor,
                         options_.backoff_factor, options_.growth_interval);
  // Apex's rule: backoff stops at the floor, growth at the ceiling. Without either the scale is
  // exactly what _amp_update_scale_ left, as in torch.
  if (options_.min_scale > 0.0) scale_.clamp_min_(options_.min_scale);
  if (options_.max_scale > 0.0) scale_.clamp_max_(options_.max_scale);
  return floor_hit;
}

// DeepSpeed's DynamicLossScaler.update_scale (deepspeed/runtime/fp16/loss_scaler.py) on device
// tensors. Its state (cur_iter, last_overflow_iter, cur_hysteresis) maps onto ours as
// growth_tracker = cur_iter - last_overflow_iter - 1 (its stable_interval) and hysteresis =
// cur_hysteresis:
//   overflow:  if hysteresis == 1: scale = max(scale * backoff, min_scale)  else hysteresis -= 1;
//              the tracker restarts at 0 (last_overflow_iter = cur_iter).
//   clean:     consecutive_hysteresis refills hysteresis; when tracker > 0 and tracker % interval
//              == 0 the scale grows (refilling hysteresis when not consecutive); tracker += 1.
// So the first growth after an overflow comes on the (interval + 1)-th clean step, one step
// later than torch's. DeepSpeed divides by one scale_factor both ways; growth_factor and
// backoff_factor generalise it (2 and 0.5 are DeepSpeed's). As in torch, a growth into inf is
// not taken, and max_scale (0: none) caps it.
void LossScaler::update_deepspeed(const torch::Tensor& overflow) {
  const auto exhausted = hysteresis_.le(1);
  auto backed_off = scale_ * options_.backoff_factor;
  if (options_.min_scale > 0.0) backed_off.clamp_min_(options_.min_scale);
  auto grown = scale_ * options_.growth_factor;
  if (options_.max_scale > 0.0) grown.clamp_max_(options_.max_scale);
  const auto grow = overflow.logical_not() & growth_tracker_.gt(0) &
                    growth_tracker_.remainder(options_.growth_interval).eq(0);
  const auto full = torch::full_like(hysteresis_, options_.hysteresis);

  const auto clean_scale = torch::where(grow & grown.isfinite(), grown, scale_);
  const auto clean_hysteresis =
      options_.consecutive_hysteresis ? full : torch::where(grow, full, hysteresis_);
  const auto overflow_hysteresis = torch::where(exhausted, hysteresis_, hysteresis_ - 1);

  scale_.copy_(torch::where(overflow, torch::where(exhausted, backed_off, scale_), clean_scale));
  hysteresis_.copy_(torch::where(overflow, overflow_hysteresis, clean_hysteresis));
  growth_tracker_.copy_(torch::where(overflow, torch::zeros_like(growth_tracker_),
                                     growth_tracker_ + 1));
}

LossScalerState LossScaler::state() const {
  return {scale_.item<float>(), growth_tracker_.item<int32_t>(), hysteresis_.item<int32_t>()};
}

void LossScaler::load_state(const LossScalerState& state) {
  scale_.fill_(state.scale);
  growth_tracker_.fill_(state.growth_tracker);
  hysteresis_.fill_(state.hysteresis > 0 ? state.hysteresis : options_.hysteresis);
}

}  // namespace ampt::precision

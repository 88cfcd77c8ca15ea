#include "ampt/precision/loss_scaler.h"

#include <ATen/ops/_amp_foreach_non_finite_check_and_unscale.h>
#include <ATen/ops/_amp_update_scale.h>

#include <map>

namespace ampt::precision {

LossScaler::LossScaler(const LossScalerOptions& options, const torch::Device& device)
    : options_(options),
      scale_(torch::full({}, options.enabled ? options.init_scale : 1.0,
                         torch::dtype(torch::kFloat32).device(device))),
      growth_tracker_(torch::zeros({}, torch::dtype(torch::kInt32).device(device))) {}

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

void LossScaler::update(const torch::Tensor& found_inf) {
  if (!options_.enabled) return;
  at::_amp_update_scale_(scale_, growth_tracker_, found_inf, options_.growth_factor,
                         options_.backoff_factor, options_.growth_interval);
}

LossScalerState LossScaler::state() const {
  return {scale_.item<float>(), growth_tracker_.item<int32_t>()};
}

void LossScaler::load_state(const LossScalerState& state) {
  scale_.fill_(state.scale);
  growth_tracker_.fill_(state.growth_tracker);
}

}  // namespace ampt::precision

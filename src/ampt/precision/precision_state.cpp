#include "ampt/precision/precision_state.h"

#include <algorithm>

namespace ampt::precision {

PrecisionOptions precision_options(const config::Config& config) {
  // ZeRO-3 gathers its blocks in the compute dtype already, and steps shards, not weights.
  return {config::precision_stages(config),
          config.strict_precision,
          config.amp_opt_level,
          config::split_module_patterns(config.keep_fp32_modules),
          scaler_options(config, true),
          config.half_weights && config.zero_stage < 3,
          config.fp32_weight_grads};
}

namespace {

// The dtype of O1's half copies under `policy`: its autocast dtype, or none (kFloat).
c10::ScalarType copies_dtype(const PrecisionPolicy& policy, const PrecisionOptions& options) {
  const bool copies = options.half_weights && policy.autocast &&
                      options.opt_level != config::OptLevel::O2 &&
                      policy.compute_dtype != c10::kFloat;
  return copies ? policy.compute_dtype : c10::kFloat;
}

// The scaler of a stage: on where its precision scales the loss, unless the run turned it off.
LossScalerOptions scaling(LossScalerOptions options, bool enabled) {
  options.enabled = options.enabled && enabled;
  return options;
}

}  // namespace

PrecisionState::PrecisionState(const PrecisionOptions& options, torch::nn::Module& module,
                               const c10::Device& device)
    : options_(options),
      device_(device),
      choice_(choose_precision(options_.stages.front().precision, options_.strict, device)),
      policy_(make_policy(choice_.precision, options_.opt_level)),
      scaler_(scaling(options_.scaler, policy_.loss_scaling), device),
      islands_(select_islands(module, options_.keep_fp32_modules,
                              options_.opt_level == config::OptLevel::O2)),
      masters_(module, options_.opt_level == config::OptLevel::O2,
               [this](const std::string& name) { return islands_.owns_parameter(name); }),
      half_weights_(module.parameters(), options_.fp32_weight_grads),
      used_{policy_.name()} {
  masters_.set_dtype(policy_.weight_dtype);
  half_weights_.set_dtype(copies_dtype(policy_, options_));
}

std::size_t PrecisionState::stage_at(int64_t step, int64_t epoch) const {
  return config::stage_at(options_.stages, step, epoch);
}

StageSwitch PrecisionState::enter_stage(std::size_t index) {
  StageSwitch change;
  change.from = policy_.name();
  stage_ = index;
  choice_ = choose_precision(options_.stages[index].precision, options_.strict, device_);
  policy_ = make_policy(choice_.precision, options_.opt_level);
  if (policy_.loss_scaling != scaler_.enabled()) {
    scaler_ = LossScaler(scaling(options_.scaler, policy_.loss_scaling), device_);
  }
  masters_.set_dtype(policy_.weight_dtype);
  half_weights_.set_dtype(copies_dtype(policy_, options_));
  used_.push_back(policy_.name());
  change.to = policy_.name();
  change.reason = choice_.reason;
  change.loss_scaling = policy_.loss_scaling;
  return change;
}

void PrecisionState::forget_earlier_stages() { used_ = {policy_.name()}; }

c10::ScalarType frozen_dtype(const std::vector<PrecisionPolicy>& stage_policies) {
  const auto& first = stage_policies.front();
  const auto dtype = first.autocast ? first.compute_dtype : c10::kFloat;
  const bool shared = std::ranges::all_of(stage_policies, [dtype](const PrecisionPolicy& p) {
    return p.autocast && p.compute_dtype == dtype;
  });
  return shared ? dtype : c10::kFloat;
}

std::vector<PrecisionPolicy> stage_policies(const PrecisionOptions& options,
                                            const c10::Device& device) {
  std::vector<PrecisionPolicy> policies;
  for (const auto& stage : options.stages) {
    policies.push_back(make_policy(choose_precision(stage.precision, false, device).precision,
                                   options.opt_level));
  }
  return policies;
}

std::vector<std::string> PrecisionState::warnings() const {
  std::vector<std::string> out;
  for (const auto& stage : options_.stages) {
    const auto warning = choose_precision(stage.precision, false, device_).warning;
    if (!warning.empty() && std::ranges::find(out, warning) == out.end()) out.push_back(warning);
  }
  return out;
}

}  // namespace ampt::precision

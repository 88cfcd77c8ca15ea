// A run's precision as one object: its stages (a precision schedule, or the one precision), the
// stage in force with the device's choice and its policy, the loss scaler, the fp32 islands and
// O2's master weights, and the switch from one stage to the next. The trainer asks it what to
// compute in; nothing else in a run changes these.
#pragma once

#include "ampt/config/config.h"
#include "ampt/config/precision_schedule.h"
#include "ampt/precision/choice.h"
#include "ampt/precision/half_weights.h"
#include "ampt/precision/loss_scaler.h"
#include "ampt/precision/master_weights.h"
#include "ampt/precision/policy.h"
#include "ampt/precision/precision_islands.h"

#include <torch/nn/module.h>

#include <cstddef>
#include <string>
#include <vector>

namespace ampt::precision {

// What the precision state is built from: the run's settings for it, taken from the Config once
// (precision_options).
struct PrecisionOptions {
  std::vector<config::PrecisionStage> stages;  // at least one
  bool strict = false;                         // strict_precision
  config::OptLevel opt_level = config::OptLevel::O1;
  std::vector<std::string> keep_fp32_modules;  // module-name patterns
  LossScalerOptions scaler;  // `enabled`: whether a stage that scales may (grad_scaler_enabled)
  bool half_weights = false;       // O1's half working weights (half_weights.h)
  bool fp32_weight_grads = false;  // their gradients in fp32 from the GEMM
};

PrecisionOptions precision_options(const config::Config& config);

// Each stage's policy on `device`, in order.
std::vector<PrecisionPolicy> stage_policies(const PrecisionOptions& options,
                                            const c10::Device& device);
// The dtype a frozen base is held in: the half dtype every stage computes in, else fp32 (a
// schedule through fp32, or one changing the half dtype, needs the base's own values).
c10::ScalarType frozen_dtype(const std::vector<PrecisionPolicy>& stage_policies);

// The stage switch just made, for the log.
struct StageSwitch {
  std::string from, to;  // policy names: "FP32", "BF16"
  std::string reason;    // the device's choice's reason, if any
  bool loss_scaling = false;
};

class PrecisionState {
 public:
  // Stage 1 on `device`: throws RuntimeError where the device cannot give the precision asked
  // (fp8 on a CPU, bf16 with `strict` on an old GPU) and UsageError for a keep_fp32_modules
  // pattern that matches no module of `module`.
  PrecisionState(const PrecisionOptions& options, torch::nn::Module& module,
                 const c10::Device& device);
  PrecisionState(const PrecisionState&) = delete;  // the masters look up islands through `this`
  PrecisionState& operator=(const PrecisionState&) = delete;

  const std::vector<config::PrecisionStage>& stages() const { return options_.stages; }
  std::size_t stage() const { return stage_; }
  // The stage in force at `step` of `epoch`.
  std::size_t stage_at(int64_t step, int64_t epoch) const;
  // Switches to stage `index`: the device's choice for it, its policy, the loss scaler (fresh at
  // init_scale when fp16 starts, gone when it ends), the dtype of O2's half weights, re-cast
  // from the masters, and that of O1's half copies.
  StageSwitch enter_stage(std::size_t index);
  // After a resume: the stage the checkpoint was in is the first this run used.
  void forget_earlier_stages();
  // precision::frozen_dtype of this run's stages.
  c10::ScalarType frozen_dtype() const { return precision::frozen_dtype(stage_policies()); }
  // Stores the frozen parameters (a LoRA base) in frozen_dtype() (MasterWeights::store_frozen).
  void store_frozen() { masters_.store_frozen(frozen_dtype()); }

  const PrecisionChoice& choice() const { return choice_; }
  const PrecisionPolicy& policy() const { return policy_; }
  // Each stage's policy on this device, in order (the compat report reads the riskiest).
  std::vector<PrecisionPolicy> stage_policies() const {
    return precision::stage_policies(options_, device_);
  }
  LossScaler& scaler() { return scaler_; }
  const LossScaler& scaler() const { return scaler_; }
  const PrecisionIslands& islands() const { return islands_; }
  MasterWeights& masters() { return masters_; }
  const MasterWeights& masters() const { return masters_; }
  HalfWeights& half_weights() { return half_weights_; }
  const HalfWeights& half_weights() const { return half_weights_; }
  // "FP32", "BF16": each stage's policy name as the run entered it, in order.
  const std::vector<std::string>& used() const { return used_; }
  // One each, once: bf16 or fp16 asked of a CPU that emulates it (PrecisionChoice::warning).
  std::vector<std::string> warnings() const;

 private:
  PrecisionOptions options_;
  c10::Device device_;
  std::size_t stage_ = 0;
  PrecisionChoice choice_;
  PrecisionPolicy policy_;
  LossScaler scaler_;
  PrecisionIslands islands_;
  MasterWeights masters_;
  HalfWeights half_weights_;
  std::vector<std::string> used_;
};

}  // namespace ampt::precision

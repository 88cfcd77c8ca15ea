// Turns the configured precision and opt level into what the training step actually does.
#pragma once

#include "ampt/config/config.h"

#include <c10/core/ScalarType.h>

#include <string>

namespace ampt::precision {

struct PrecisionPolicy {
  config::MixedPrecision requested = config::MixedPrecision::no;
  config::OptLevel opt_level = config::OptLevel::O1;
  bool autocast = false;                         // forward runs under autocast
  c10::ScalarType compute_dtype = c10::kFloat;   // autocast's low-precision dtype
  bool loss_scaling = false;                     // dynamic loss scaler active (fp16 only)
  // The dtype the model's weights are stored in: compute_dtype under O2 (fp32 masters held by
  // the optimizer, norms kept fp32), else fp32.
  c10::ScalarType weight_dtype = c10::kFloat;
  bool fp8 = false;  // the GPT's Linear layers run through fp8_linear (bf16 autocast elsewhere)

  // "FP32", "BF16", "FP16" or "FP8": the precision the matmuls run in.
  std::string name() const;
  // One sentence on what this policy keeps in which dtype and why the scaler is on or off.
  std::string explanation() const;
};

PrecisionPolicy make_policy(config::MixedPrecision requested, config::OptLevel opt_level);

}  // namespace ampt::precision

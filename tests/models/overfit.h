// Shared by the model tests: train a model on one fixed batch and report how the loss moved.
#pragma once

#include "ampt/config/config.h"
#include "ampt/models/registry.h"

#include <torch/types.h>

namespace ampt_test {

struct LossCurve {
  double first = 0.0;
  double last = 0.0;
};

// `steps` AdamW steps on (inputs, targets) with the forward under autocast to `precision` (no
// autocast for MixedPrecision::no), the loss as the trainer computes it. No loss scaler: the
// tiny models here keep their fp16 gradients in range.
LossCurve overfit(ampt::models::Model& model, const torch::Tensor& inputs,
                  const torch::Tensor& targets, ampt::config::MixedPrecision precision, int steps,
                  double lr);

}  // namespace ampt_test

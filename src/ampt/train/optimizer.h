// AdamW and SGD on ATen's fused kernels, which skip a step on the device when found_inf is set.
#pragma once

#include "ampt/config/config.h"
#include "ampt/core/named_tensors.h"

#include <torch/types.h>

#include <memory>
#include <string>
#include <vector>

namespace ampt::train {

// The optimizer reads gradients that are already unscaled and clipped. A step with found_inf = 1
// leaves weights and state untouched without the host ever reading found_inf.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual void step(double lr, const torch::Tensor& found_inf) = 0;
  // The same with lr a 0-dim float32 tensor on the parameters' device: a captured CUDA graph
  // reads the rate its replay finds there, so the schedule needs no re-capture.
  virtual void step(const torch::Tensor& lr, const torch::Tensor& found_inf) = 0;
  virtual std::string describe() const = 0;
  virtual std::string kind() const = 0;  // "adamw", "sgd"
  // The live state tensors, named "<parameter>.<state>": a checkpoint saves them and a resume
  // copies saved values into them.
  virtual NamedTensors state() const = 0;
};

// Weight decay applies to matrices only (not biases or norm gains), as in GPT-2 and nanoGPT.
std::unique_ptr<Optimizer> make_optimizer(const config::Config& config,
                                          const NamedTensors& named_parameters);

}  // namespace ampt::train

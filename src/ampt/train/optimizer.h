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

// A state tensor the optimizer keeps per parameter: shaped like it (per_element: AdamW's moments,
// SGD's momentum) or a 0-dim float32 count (AdamW's step).
struct StateKind {
  std::string name;
  bool per_element = true;
};
// adamw: exp_avg, exp_avg_sq, step; sgd: momentum_buffer, or nothing without momentum.
std::vector<StateKind> optimizer_state_kinds(const config::Config& config);

// What an optimizer steps, laid out by the caller: whole parameters, or the pieces of a ZeRO
// shard, each a view of a flat buffer (its state too). The fused kernels are elementwise, so a
// piece steps exactly as the same elements of the whole parameter would.
struct OptimizerTensors {
  std::vector<std::string> names;
  std::vector<torch::Tensor> params;
  std::vector<bool> decay;  // weight decay applies
  std::vector<std::vector<torch::Tensor>> state;  // state[k][i]: kind k of params[i]
};
std::unique_ptr<Optimizer> make_optimizer(const config::Config& config, OptimizerTensors tensors);

// Whole parameters with fresh state. Weight decay applies to matrices only (not biases or norm
// gains), as in GPT-2 and nanoGPT.
OptimizerTensors whole_parameters(const config::Config& config, const NamedTensors& named_parameters);
// An optimizer over whole_parameters(config, named_parameters).
std::unique_ptr<Optimizer> make_optimizer(const config::Config& config,
                                          const NamedTensors& named_parameters);

}  // namespace ampt::train

// ZeRO-3 on a model's blocks: where each parameter belongs and the dtype it is gathered in
// (parameter_blocks, with the usage checks of --param_dtype), and the per-block hooks
// (models/block_hooks.h) that gather a block before it computes, prefetch the next one in the
// direction the pass runs, release it after its forward and gather it again when backward
// reaches its output.
#pragma once

#include "ampt/config/config.h"
#include "ampt/distributed/sharded_parameters.h"
#include "ampt/models/block_hooks.h"
#include "ampt/precision/policy.h"
#include "ampt/precision/precision_islands.h"

#include <torch/nn/module.h>

#include <string>
#include <vector>

namespace ampt::train {

// The dtype blocks' Linear parameters are gathered in under `policy` (a precision stage): the
// explicit --param_dtype, or with auto the autocast dtype (fp32 without autocast).
c10::ScalarType gather_dtype(config::ParamDtype param_dtype, const precision::PrecisionPolicy& policy);

// Throws UsageError (one line) when --param_dtype does not fit the run: set below zero_stage 3,
// narrower than fp32 where a stage computes without autocast, a half dtype other than a stage's
// autocast dtype, or fp32 under O2 (whose weights are the half copies).
void check_param_dtype(const config::Config& config,
                       const std::vector<precision::PrecisionPolicy>& stages);

// The block whose dotted prefix ("h.3.") starts `name`, -1 for none (the root).
int64_t block_index(const std::string& name, const std::vector<std::string>& block_names);

// Each parameter's block (by the block names' dotted prefixes, "h.3."; -1 for the rest) and
// gather dtype: under O2 the blocks' half parameters take `policy`'s gather_dtype; under O1 the
// weights and biases of the blocks' Linear layers outside fp32 islands do (what autocast casts),
// following the compute dtype from stage to stage unless --param_dtype fixes it; everything
// else keeps its own dtype, so norms, embeddings, the head and islands compute as without ZeRO.
// `o2`: the parameters are O2's half copies.
distributed::ParameterBlocks parameter_blocks(const torch::nn::Module& module,
                                              const std::vector<std::string>& block_names,
                                              const std::vector<std::string>& parameter_names,
                                              const std::vector<torch::Tensor>& parameters,
                                              const precision::PrecisionIslands& islands,
                                              const precision::PrecisionPolicy& policy,
                                              config::ParamDtype param_dtype, bool o2);

class BlockGather : public models::BlockHooks {
 public:
  explicit BlockGather(distributed::ShardedParameters& parameters) : parameters_(parameters) {}
  void before_forward(std::size_t index) override;
  torch::Tensor after_forward(std::size_t index, const torch::Tensor& output) override;

 private:
  distributed::ShardedParameters& parameters_;
};

}  // namespace ampt::train

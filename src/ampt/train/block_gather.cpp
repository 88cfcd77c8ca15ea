#include "ampt/train/block_gather.h"

#include "ampt/config/enum_names.h"
#include "ampt/core/errors.h"
#include "ampt/models/activation_checkpoint.h"

#include <torch/nn/modules/linear.h>

#include <fmt/format.h>

#include <unordered_set>

namespace ampt::train {
namespace {

const char* dtype_name(c10::ScalarType dtype) {
  switch (dtype) {
    case c10::kBFloat16: return "bf16";
    case c10::kHalf: return "fp16";
    default: return "fp32";
  }
}

}  // namespace

c10::ScalarType gather_dtype(config::ParamDtype param_dtype, const precision::PrecisionPolicy& policy) {
  switch (param_dtype) {
    case config::ParamDtype::fp32: return c10::kFloat;
    case config::ParamDtype::bf16: return c10::kBFloat16;
    case config::ParamDtype::fp16: return c10::kHalf;
    case config::ParamDtype::auto_select: break;
  }
  return policy.autocast ? policy.compute_dtype : c10::kFloat;
}

void check_param_dtype(const config::Config& config,
                       const std::vector<precision::PrecisionPolicy>& stages) {
  const auto asked = config.param_dtype;
  if (asked == config::ParamDtype::auto_select) return;
  const auto name = config::to_string(asked);
  if (config.zero_stage != 3) {
    throw UsageError(fmt::format(
        "param_dtype {} applies to zero_stage 3, which gathers weights to compute with; "
        "zero_stage {} keeps whole weights in the dtype the precision gives them: leave "
        "param_dtype auto",
        name, config.zero_stage));
  }
  for (size_t i = 0; i < stages.size(); ++i) {
    const auto& policy = stages[i];
    const auto where = stages.size() > 1 ? fmt::format("precision stage {} ({})", i + 1, policy.name())
                                         : fmt::format("the run ({})", policy.name());
    if (asked == config::ParamDtype::fp32) {
      if (policy.opt_level == config::OptLevel::O2 && policy.autocast) {
        throw UsageError(fmt::format(
            "param_dtype fp32 with amp_opt_level O2: O2 computes with half copies of the "
            "weights; use amp_opt_level O1 to compute from fp32 weights, or param_dtype auto"));
      }
      continue;
    }
    if (!policy.autocast) {
      throw UsageError(fmt::format("param_dtype {} needs autocast, and {} computes in fp32: use "
                                   "param_dtype fp32 or auto",
                                   name, where));
    }
    if (policy.compute_dtype != gather_dtype(asked, policy)) {
      throw UsageError(fmt::format(
          "param_dtype {} differs from the autocast dtype {} of {}: a block's weights are "
          "gathered in the dtype it computes in; use param_dtype {}, fp32 or auto",
          name, dtype_name(policy.compute_dtype), where, dtype_name(policy.compute_dtype)));
    }
  }
}

int64_t block_index(const std::string& name, const std::vector<std::string>& block_names) {
  int64_t block = -1;
  for (size_t b = 0; b < block_names.size(); ++b) {
    if (name.rfind(block_names[b] + ".", 0) == 0) block = static_cast<int64_t>(b);
  }
  return block;
}

distributed::ParameterBlocks parameter_blocks(const torch::nn::Module& module,
                                              const std::vector<std::string>& block_names,
                                              const std::vector<std::string>& parameter_names,
                                              const std::vector<torch::Tensor>& parameters,
                                              const precision::PrecisionIslands& islands,
                                              const precision::PrecisionPolicy& policy,
                                              config::ParamDtype param_dtype, bool o2) {
  // Under O1 autocast casts exactly the Linear layers' weights and biases for their matmuls (in
  // every stage that has autocast: a stage without it gathers them in fp32).
  std::unordered_set<std::string> cast_by_autocast;
  if (!o2) {
    for (const auto& item : module.named_modules("", /*include_self=*/false)) {
      if (item.value()->as<torch::nn::Linear>() == nullptr) continue;
      if (islands.find(item.value().get()) != nullptr) continue;
      cast_by_autocast.insert(item.key() + ".weight");
      cast_by_autocast.insert(item.key() + ".bias");
    }
  }
  const auto half = gather_dtype(param_dtype, policy);  // fp32 for a stage without autocast
  distributed::ParameterBlocks out;
  out.count = static_cast<int64_t>(block_names.size());
  for (size_t i = 0; i < parameters.size(); ++i) {
    const auto& name = parameter_names[i];
    const auto block = block_index(name, block_names);
    const auto own = parameters[i].scalar_type();
    const bool follows = block >= 0 && (o2 ? own != c10::kFloat : cast_by_autocast.count(name) > 0);
    out.block.push_back(block);
    out.dtype.push_back(follows ? half : own);
    out.follows_compute.push_back(follows && param_dtype == config::ParamDtype::auto_select);
  }
  return out;
}

void BlockGather::before_forward(std::size_t index) {
  const auto block = static_cast<int64_t>(index);
  parameters_.gather(block);
  // A recomputation runs in backward, which goes down the blocks; a forward goes up.
  if (models::recomputing()) {
    if (block > 0) parameters_.prefetch(block - 1);
  } else if (block + 1 < parameters_.blocks()) {
    parameters_.prefetch(block + 1);
  }
}

torch::Tensor BlockGather::after_forward(std::size_t index, const torch::Tensor& output) {
  const auto block = static_cast<int64_t>(index);
  parameters_.release(block);
  if (output.requires_grad()) {
    // Backward reaches the block through its output: the weights its backward reads come back
    // first, and the block below starts coming.
    output.register_hook([this, block](const torch::Tensor& grad) {
      parameters_.gather(block);
      if (block > 0) parameters_.prefetch(block - 1);
      // The block above is done with its backward: its frozen weights are not read again.
      if (block + 1 < parameters_.blocks()) parameters_.release_frozen(block + 1);
      return grad;
    });
  }
  return output;
}

}  // namespace ampt::train

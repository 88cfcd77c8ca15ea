#include "ampt/models/lora_layers.h"

#include "ampt/core/errors.h"
#include "ampt/models/lora.h"
#include "ampt/models/model_family.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace ampt::models {

LoraDims lora_dims(const config::Config& config, const ModelDims& dims) {
  LoraDims lora;
  require_base_dtype(config);
  if (config.lora_rank == 0) return lora;
  lora.targets = lora_targets_of(config, family_of(config).lora_targets);
  lora.rank = config.lora_rank;
  lora.base_dtype = config.base_dtype;
  lora.dropout = config.lora_dropout;
  lora.parameters = split_lora_targets(config.lora_target_parameters);
  const auto& parameters = lora.parameters;
  const auto matches = [](const std::string& name, const std::vector<std::string>& targets) {
    return std::ranges::any_of(targets,
                               [&](const auto& t) { return lora_target_matches(name, t); });
  };
  std::vector<std::string> names;
  // The block Linears, then the expert groups' weight stacks, as attach_lora walks them.
  for (const auto& layer : dims.layers.linears) {
    names.push_back(layer.name);
    if (matches(layer.name, lora.targets)) lora.adapted.push_back(layer);
  }
  for (const auto& layer : dims.terms.stacked_weights) {
    names.push_back(layer.name);
    if (matches(layer.name, lora.targets) || matches(layer.name, parameters)) {
      lora.adapted.push_back(layer);
    }
  }
  std::vector<std::string> expert_weights;
  for (const auto& layer : dims.terms.stacked_weights) expert_weights.push_back(layer.name);
  require_parameters_match(parameters, expert_weights);
  require_targets_match(lora.targets, names);
  return lora;
}

}  // namespace ampt::models

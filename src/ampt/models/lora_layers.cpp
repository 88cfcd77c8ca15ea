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
  std::vector<std::string> names, expert_weights;
  // The block Linears, then the expert groups' weight stacks, as attach_lora walks them.
  for (const auto& layer : dims.layers.linears) {
    names.push_back(layer.name);
    if (lora_target_matches_any(layer.name, lora.targets)) lora.adapted.push_back(layer);
  }
  for (const auto& layer : dims.terms.stacked_weights) {
    names.push_back(layer.name);
    expert_weights.push_back(layer.name);
    if (lora_target_matches_any(layer.name, lora.targets) ||
        lora_target_matches_any(layer.name, lora.parameters)) {
      require_no_expert_dropout(lora.dropout, layer.name);
      lora.adapted.push_back(layer);
    }
  }
  require_parameters_match(lora.parameters, expert_weights);
  require_targets_match(lora.targets, names);
  return lora;
}

}  // namespace ampt::models

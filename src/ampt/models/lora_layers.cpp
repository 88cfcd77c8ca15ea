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
  std::vector<std::string> names;
  for (const auto& layer : dims.layers.linears) {
    names.push_back(layer.name);
    if (std::ranges::any_of(lora.targets,
                            [&](const auto& t) { return lora_target_matches(layer.name, t); })) {
      lora.adapted.push_back(layer);
    }
  }
  require_targets_match(lora.targets, names);
  return lora;
}

}  // namespace ampt::models

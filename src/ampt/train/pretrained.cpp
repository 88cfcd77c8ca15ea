#include "ampt/train/pretrained.h"

#include "ampt/checkpoint/checkpoint.h"
#include "ampt/hf/peft_adapter.h"
#include "ampt/models/lora.h"
#include "ampt/models/model_family.h"

#include <fmt/format.h>

namespace ampt::train {

std::string load_pretrained(const config::Config& config, const NamedTensors& targets) {
  NamedTensors base, adapters;
  for (const auto& [name, tensor] : targets) {
    (models::is_lora_parameter(name) ? adapters : base).emplace_back(name, tensor);
  }
  std::string description;
  const auto& family = models::family_of(config);
  if (!config.init_from.empty()) {
    const auto weights = family.load_pretrained(config);
    checkpoint::copy_into(weights.tensors, base, "pretrained model", config.init_from);
    description = weights.description;
  }
  if (!config.init_adapter.empty()) {
    checkpoint::copy_into(hf::read_peft_adapter(config.init_adapter, family.hf_module_prefix),
                          adapters, "LoRA adapter", config.init_adapter);
    description += fmt::format(", LoRA adapters from {}", config.init_adapter);
  }
  return description;
}

}  // namespace ampt::train

#include "ampt/train/pretrained.h"

#include "ampt/checkpoint/checkpoint.h"
#include "ampt/hf/peft_adapter.h"
#include "ampt/models/lora.h"
#include "ampt/models/model_family.h"
#include "ampt/precision/placeholder.h"

#include <fmt/format.h>

namespace ampt::train {

LoadedWeights load_pretrained(const config::Config& config, const NamedTensors& targets,
                              const DeferredLoad* deferred) {
  NamedTensors base, adapters;
  for (const auto& [name, tensor] : targets) {
    (models::is_lora_parameter(name) ? adapters : base).emplace_back(name, tensor);
  }
  LoadedWeights loaded;
  const auto& family = models::family_of(config);
  if (!config.init_from.empty()) {
    checkpoint::TensorMatch match(base, "pretrained model", config.init_from);
    loaded.description = family.load_pretrained(
        config, [&](const std::string& name, const torch::Tensor& tensor) {
          const auto& target = match.target(name, tensor);
          torch::NoGradGuard no_grad;
          if (deferred != nullptr) {
            loaded.digests.emplace(name, tensor_digest(tensor));
            if (const auto it = deferred->layers.find(name); it != deferred->layers.end()) {
              return it->second->fill(tensor, deferred->format);
            }
            if (precision::is_placeholder(target)) {
              return target.set_data(tensor.to(target.device(), target.scalar_type()).contiguous());
            }
          }
          target.copy_(tensor);
        });
    match.finish();
  }
  if (!config.init_adapter.empty()) {
    checkpoint::copy_into(hf::read_peft_adapter(config.init_adapter, family.hf_module_prefix),
                          adapters, "LoRA adapter", config.init_adapter);
    loaded.description += fmt::format(", LoRA adapters from {}", config.init_adapter);
  }
  return loaded;
}

}  // namespace ampt::train

#include "ampt/train/pretrained.h"

#include "ampt/checkpoint/checkpoint.h"
#include "ampt/hf/peft_adapter.h"
#include "ampt/models/linear.h"
#include "ampt/models/quantizable.h"
#include "ampt/models/lora.h"
#include "ampt/models/model_family.h"
#include "ampt/models/moe.h"
#include "ampt/precision/placeholder.h"

#include <fmt/format.h>

namespace ampt::train {

bool base_loads_deferred(const config::Config& config) {
  return config.lora_rank > 0 && !config.init_from.empty();
}

models::Model make_model_to_load(const config::Config& config, const data::DataSpec& spec,
                                 const c10::Device& device) {
  torch::manual_seed(config.seed);
  const bool deferred = base_loads_deferred(config);
  const models::DeferredWeights deferred_weights(deferred);
  auto model = models::make_model(config, spec);
  if (deferred) precision::defer_frozen_parameters(*model.module);
  precision::move_to(*model.module, device);
  return model;
}

LoadedWeights load_pretrained(const config::Config& config, const NamedTensors& targets,
                              torch::nn::Module& model) {
  NamedTensors base, adapters;
  for (const auto& [name, tensor] : targets) {
    (models::is_lora_parameter(name) ? adapters : base).emplace_back(name, tensor);
  }
  LoadedWeights loaded;
  const auto& family = models::family_of(config);
  if (!config.init_from.empty()) {
    const bool deferred = base_loads_deferred(config);
    const auto quantized = deferred && config.base_dtype != config::BaseDtype::auto_select
                               ? models::awaiting_weights(model)
                               : std::map<std::string, models::QuantizableWeight>{};
    checkpoint::TensorMatch match(base, "pretrained model", config.init_from);
    // Under expert parallelism this rank loads its share of each expert group.
    const auto slices = models::expert_slices(model);
    loaded.description = family.load_pretrained(
        config, [&](const std::string& name, const torch::Tensor& whole) {
          const auto* slice =
              models::expert_slice_of(slices, name, whole, &models::ExpertSlice::total);
          const auto tensor = slice ? whole.narrow(0, slice->first, slice->count) : whole;
          const auto& target = match.target(name, tensor);
          torch::NoGradGuard no_grad;
          if (deferred) {
            // The whole tensor's digest: the base is the same model however it is divided.
            loaded.digests.emplace(name, tensor_digest(whole));
            if (const auto it = quantized.find(name); it != quantized.end()) {
              return it->second.owner->quantize(it->second.index, tensor.to(target.scalar_type()),
                                                config.base_dtype);
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
    checkpoint::copy_into(hf::read_peft_adapter(config.init_adapter, family.hf_module_prefix, adapters,
                                                config.lora_rank),
                          adapters, "LoRA adapter", config.init_adapter);
    loaded.description += fmt::format(", LoRA adapters from {}", config.init_adapter);
  }
  return loaded;
}

}  // namespace ampt::train

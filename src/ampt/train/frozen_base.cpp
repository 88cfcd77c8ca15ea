#include "ampt/train/frozen_base.h"

#include "ampt/config/enum_names.h"
#include "ampt/models/linear.h"
#include "ampt/models/quantizable.h"
#include "ampt/models/lora.h"
#include "ampt/models/model_family.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace ampt::train {

FrozenBase freeze_base(const config::Config& config, precision::PrecisionState& precision,
                       const std::vector<torch::Tensor>& trained, torch::nn::Module& model,
                       const std::map<std::string, TensorDigest>& digests) {
  if (config.lora_rank <= 0) return {};
  FrozenBase base;
  base.fingerprint = base_fingerprint(precision.masters().frozen(), digests);
  precision.store_frozen();
  int64_t trained_count = 0, frozen = 0;
  for (const auto& p : trained) trained_count += p.numel();
  for (const auto& [name, p] : precision.masters().frozen()) frozen += p.numel();
  std::string storage = fmt::format("in {}", c10::toString(precision.frozen_dtype()));
  if (config.base_dtype != config::BaseDtype::auto_select) {
    // Quantized from the frozen dtype, as transformers quantizes the weights it loaded.
    const int64_t bytes = models::quantize_base(model, config.base_dtype);
    bool experts = false;  // a sparse model's expert groups (moe.h) are stored too
    for (const auto& weight : models::quantizable_weights(model)) {
      experts |= weight.quantized() && dynamic_cast<models::LinearImpl*>(weight.owner) == nullptr;
    }
    storage = fmt::format("with the block Linear weights{} in {} ({:.1f} MiB), the rest {}",
                          experts ? " and the experts" : "", config::to_string(config.base_dtype),
                          static_cast<double>(bytes) / (1 << 20), storage);
  }
  // An expert group weight's adapter (lora.h) is a pair of factors as a Linear's is.
  int64_t expert_adapters = 0;
  for (const auto& weight : models::quantizable_weights(model)) {
    expert_adapters += static_cast<bool>(models::expert_lora_adapter(weight));
  }
  const auto linear_adapters = static_cast<int64_t>(trained.size() / 2) - expert_adapters;
  const auto options = models::lora_options(config, models::family_of(config).lora_targets);
  const auto parameters =
      options.parameters.empty() ? std::string() : fmt::format("; {}", fmt::join(options.parameters, ","));
  base.note = fmt::format(
      "rank {}, alpha {:g} (scale {:g}), dropout {:g} on {} Linear layers{} ({}{}): {} trainable "
      "parameters with fp32 masters, {} frozen {} (base fingerprint {})",
      config.lora_rank, config.lora_alpha, config.lora_alpha / config.lora_rank,
      config.lora_dropout, linear_adapters,
      expert_adapters > 0 ? fmt::format(" and {} expert weights", expert_adapters) : "",
      fmt::join(options.targets, ","),
      parameters, trained_count, frozen, storage, base.fingerprint);
  return base;
}

}  // namespace ampt::train

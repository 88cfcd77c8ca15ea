#include "ampt/models/registry.h"

#include "ampt/config/dataset_spec.h"
#include "ampt/core/errors.h"
#include "ampt/models/lora.h"
#include "ampt/models/model_family.h"
#include "ampt/models/moe.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace ampt::models {
namespace {

// grad_ckpt and fp8 act on transformer blocks and their Linear layers: other models have none.
void require_transformer(const config::Config& config) {
  if (config.grad_ckpt) {
    throw UsageError(fmt::format("grad_ckpt recomputes transformer blocks and model {} has none: "
                                 "use a gpt or llama model or drop --grad_ckpt",
                                 config.model));
  }
  if (config.mixed_precision == config::MixedPrecision::fp8) {
    throw UsageError(fmt::format("mixed_precision fp8 runs a transformer's Linear layers in fp8 and "
                                 "model {} is not a transformer: use a gpt or llama model, or bf16",
                                 config.model));
  }
}

// --init_from's weights go only into a family that can take them.
void require_pretrained(const config::Config& config, const ModelFamily& family) {
  if (config.init_from.empty() || family.pretrained) return;
  std::vector<std::string> takers;
  for (const auto& other : model_families()) {
    if (other.pretrained) takers.push_back(other.name);
  }
  throw UsageError(fmt::format("init_from loads a pretrained Hugging Face model, and model {} "
                               "cannot take one: leave --model out, or use {}",
                               config.model, fmt::join(takers, ", ")));
}

}  // namespace

data::SampleRequest sample_request(const config::Config& config) {
  const auto& family = family_of(config);
  require_pretrained(config, family);
  if (!family.language_model) {
    const auto dataset = config::parse_dataset_spec(config.dataset);
    if (dataset && (dataset->kind == config::DatasetKind::text ||
                    dataset->kind == config::DatasetKind::tokens)) {
      std::vector<std::string> language_models;
      for (const auto& other : model_families()) {
        if (!other.language_model) continue;
        language_models.push_back(other.name);
        language_models.insert(language_models.end(), other.presets.begin(), other.presets.end());
      }
      throw UsageError(fmt::format("dataset '{}' is language-model data but model {} is not a "
                                   "language model: use --model {}",
                                   config.dataset, config.model, fmt::join(language_models, ", ")));
    }
  }
  return family.sample_request(config);
}

Model make_model(const config::Config& config, const data::DataSpec& spec) {
  const auto& family = family_of(config);
  require_pretrained(config, family);
  if (!family.transformer_blocks) require_transformer(config);
  require_base_dtype(config);
  if (config.lora_rank == 0) return family.build(config, spec);
  auto options = lora_options(config, family.lora_targets);
  auto model = family.build(config, spec);
  attach_lora(*model.module, options);
  return model;
}

int64_t parameter_count(const torch::nn::Module& module) {
  int64_t count = 0;
  const auto slices = expert_slices(module);
  for (const auto& item : module.named_parameters()) {
    const auto slice = slices.find(item.key());
    count += slice == slices.end()
                 ? item.value().numel()
                 : item.value().numel() / slice->second.count * slice->second.total;
  }
  return count;
}

}  // namespace ampt::models

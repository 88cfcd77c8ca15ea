#include "ampt/models/model_family.h"

#include "ampt/core/errors.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace ampt::models {

const std::vector<ModelFamily>& model_families() {
  static const std::vector<ModelFamily> families = {mlp_family(), cnn_family(), gpt_family(),
                                                     llama_family()};
  return families;
}

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const auto& family : model_families()) {
    names.push_back(family.name);
    names.insert(names.end(), family.presets.begin(), family.presets.end());
  }
  return names;
}

std::vector<std::string> transformer_model_kinds() {
  std::vector<std::string> kinds;
  const auto add = [&kinds](const std::string& kind) {
    if (std::ranges::find(kinds, kind) == kinds.end()) kinds.push_back(kind);
  };
  for (const auto& family : model_families()) {
    if (!family.transformer_blocks) continue;
    add(family.name);
    for (const auto& [type, model] : family.hf_model_types) add(model);
  }
  return kinds;
}

const ModelFamily* find_family(std::string_view model) {
  for (const auto& family : model_families()) {
    if (family.name == model || std::ranges::find(family.presets, model) != family.presets.end()) {
      return &family;
    }
  }
  return nullptr;
}

PretrainedWeights pretrained_weights(const config::Config& config) {
  std::map<std::string, torch::Tensor> by_name;
  auto description = family_of(config).load_pretrained(
      config, [&](const std::string& name, const torch::Tensor& tensor) {
        by_name[name] = tensor.to(torch::kFloat32).contiguous();
      });
  return {NamedTensors(by_name.begin(), by_name.end()), std::move(description)};
}

const ModelFamily& family_of(const config::Config& config) {
  if (const auto* family = find_family(config.model)) return *family;
  throw UsageError(fmt::format("unknown model '{}': expected one of {}", config.model,
                               fmt::join(model_names(), ", ")));
}

}  // namespace ampt::models

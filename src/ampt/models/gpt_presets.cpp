#include "ampt/models/gpt_presets.h"

#include "ampt/core/errors.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace ampt::models {

const std::vector<GptPreset>& gpt_presets() {
  static const std::vector<GptPreset> presets = {
      {"gpt-tiny", {2, 64, 4, 64, 256, 0.0}},
      {"gpt2-124m", {12, 768, 12, 1024, 50304, 0.0}},
      {"gpt2-350m", {24, 1024, 16, 1024, 50304, 0.0}},
  };
  return presets;
}

bool is_gpt(const std::string& model) {
  return model == "gpt" ||
         std::ranges::find(gpt_presets(), model, &GptPreset::name) != gpt_presets().end();
}

GptDims resolve_gpt_dims(const config::Config& config) {
  if (!is_gpt(config.model)) throw std::invalid_argument("not a GPT model: " + config.model);
  const std::string preset_name = config.model == "gpt" ? "gpt-tiny" : config.model;
  GptDims dims = std::ranges::find(gpt_presets(), preset_name, &GptPreset::name)->dims;
  const auto override_with = [](int64_t& dim, int64_t option) {
    if (option != 0) dim = option;
  };
  override_with(dims.n_layer, config.n_layer);
  override_with(dims.n_embd, config.n_embd);
  override_with(dims.n_head, config.n_head);
  override_with(dims.block_size, config.block_size);
  override_with(dims.vocab_size, config.vocab_size);
  dims.dropout = config.dropout;
  if (dims.n_embd % dims.n_head != 0) {
    throw UsageError(fmt::format(
        "n_embd {} is not divisible by n_head {} (model {}): n_embd must be a multiple of n_head",
        dims.n_embd, dims.n_head, config.model));
  }
  return dims;
}

}  // namespace ampt::models

#include "ampt/models/gpt_presets.h"

#include "ampt/core/errors.h"
#include "ampt/hf/gpt2_config.h"
#include "ampt/hf/pretrained.h"
#include "ampt/models/family_support.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace ampt::models {

const std::vector<GptPreset>& gpt_presets() {
  static const std::vector<GptPreset> presets = {
      {"gpt-tiny", {2, 64, 4, 64, 256, 0.0}},
      {"gpt2-124m", {12, 768, 12, 1024, 50304, 0.0}},
      {"gpt2-350m", {24, 1024, 16, 1024, 50304, 0.0}},
      {"gpt2-774m", {36, 1280, 20, 1024, 50304, 0.0}},
      {"gpt2-1558m", {48, 1600, 25, 1024, 50304, 0.0}},
  };
  return presets;
}

bool is_gpt(const std::string& model) {
  return model == "gpt" ||
         std::ranges::find(gpt_presets(), model, &GptPreset::name) != gpt_presets().end();
}

int64_t padded_vocab(int64_t vocab) { return (vocab + 63) / 64 * 64; }

namespace {

// The architecture of config.init_from's config.json; the dimension options may only repeat it.
GptDims gpt_pretrained_dims(const config::Config& config) {
  const auto files = hf::pretrained_files(config);
  const auto hf_config = hf::read_gpt2_config(files.config_json);
  GptDims dims{hf_config.n_layer, hf_config.n_embd, hf_config.n_head, hf_config.n_positions,
               padded_vocab(hf_config.vocab_size), config.dropout, hf_config.vocab_size,
               hf_config.layer_norm_epsilon, hf_config.tanh_gelu()};
  require_pretrained_dims(config, files.config_json, hf_config.n_layer, hf_config.n_embd,
                          hf_config.n_head, hf_config.vocab_size);
  if (config.block_size > hf_config.n_positions) {
    throw UsageError(fmt::format("block_size {} exceeds {}'s n_positions {}: the pretrained model "
                                 "has no position embedding beyond it",
                                 config.block_size, files.config_json, hf_config.n_positions));
  }
  if (config.model != "gpt") {
    const auto& preset = std::ranges::find(gpt_presets(), config.model, &GptPreset::name)->dims;
    if (preset.n_layer != dims.n_layer || preset.n_embd != dims.n_embd ||
        preset.n_head != dims.n_head) {
      throw UsageError(fmt::format("model {} (n_layer {}, n_embd {}, n_head {}) is not the "
                                   "architecture of {} (n_layer {}, n_embd {}, n_head {}): leave "
                                   "--model out with init_from",
                                   config.model, preset.n_layer, preset.n_embd, preset.n_head,
                                   files.config_json, dims.n_layer, dims.n_embd, dims.n_head));
    }
  }
  return dims;
}

}  // namespace

LayerInventory layer_inventory(const GptDims& dims) {
  const int64_t C = dims.n_embd;
  LayerInventory inventory;
  for (int64_t i = 0; i < dims.n_layer; ++i) {
    const auto block = fmt::format("h.{}", i);
    inventory.blocks.push_back(block);
    const auto layer = [&](const char* name, LinearRole role, int64_t in, int64_t out) {
      inventory.linears.push_back({fmt::format("{}.{}", block, name), block, role, in, out, true});
    };
    layer("attn.c_attn", LinearRole::qkv, C, 3 * C);
    layer("attn.c_proj", LinearRole::o, C, C);
    layer("mlp.c_fc", LinearRole::fc, C, 4 * C);
    layer("mlp.c_proj", LinearRole::down, 4 * C, C);
  }
  inventory.head_in = C;
  inventory.head_out = dims.vocab_size;
  inventory.one_precision = {{LinearRole::fc, LinearRole::down}};
  return inventory;
}

hf::DeclaredLinears declared_linears(const hf::Gpt2Config& config) {
  GptDims dims;
  dims.n_layer = config.n_layer;
  dims.n_embd = config.n_embd;
  return declared_linears(layer_inventory(dims));
}

int64_t gpt_window(const config::Config& config, const GptDims& dims) {
  return config.block_size > 0 ? config.block_size : dims.block_size;
}

GptDims resolve_gpt_dims(const config::Config& config) {
  if (!is_gpt(config.model)) throw std::invalid_argument("not a GPT model: " + config.model);
  if (config.sliding_window != 0) {
    throw UsageError(fmt::format("sliding_window {} with model {}: GPT-2's attention has no window; "
                                 "the Llama family's mistral, qwen2 and qwen3 presets have one",
                                 config.sliding_window, config.model));
  }
  if (!config.init_from.empty()) return gpt_pretrained_dims(config);
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

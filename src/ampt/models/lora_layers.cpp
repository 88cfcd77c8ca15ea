#include "ampt/models/lora_layers.h"

#include "ampt/core/errors.h"
#include "ampt/models/lora.h"
#include "ampt/models/model_family.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace ampt::models {

std::vector<LinearLayer> linear_layers(const ModelDims& dims) {
  std::vector<LinearLayer> out;
  if (dims.family == ModelDims::Family::gpt) {
    const int64_t C = dims.gpt.n_embd;
    for (int64_t i = 0; i < dims.gpt.n_layer; ++i) {
      const auto block = fmt::format("h.{}.", i);
      out.push_back({block + "attn.c_attn", C, 3 * C, true});
      out.push_back({block + "attn.c_proj", C, C, false});
      out.push_back({block + "mlp.c_fc", C, 4 * C, true});
      out.push_back({block + "mlp.c_proj", 4 * C, C, false});
    }
  } else if (dims.family == ModelDims::Family::llama) {
    const auto& m = dims.llama;
    // The query and output projections are n_head · head_dim = n_embd wide.
    const int64_t C = m.n_embd, kv = m.n_kv_head * m.head_dim(), I = m.intermediate;
    for (int64_t i = 0; i < m.n_layer; ++i) {
      const auto block = fmt::format("layers.{}.", i);
      out.push_back({block + "self_attn.q_proj", C, C, true});
      out.push_back({block + "self_attn.k_proj", C, kv, true});
      out.push_back({block + "self_attn.v_proj", C, kv, true});
      out.push_back({block + "self_attn.o_proj", C, C, false});
      out.push_back({block + "mlp.gate_proj", C, I, true});
      out.push_back({block + "mlp.up_proj", C, I, true});
      out.push_back({block + "mlp.down_proj", I, C, false});
    }
  }
  return out;
}

LoraDims lora_dims(const config::Config& config, const ModelDims& dims) {
  LoraDims lora;
  if (config.lora_rank == 0) return lora;
  lora.targets = lora_targets_of(config, family_of(config).lora_targets);
  lora.rank = config.lora_rank;
  lora.dropout = config.lora_dropout;
  const auto layers = linear_layers(dims);
  std::vector<std::string> names;
  for (const auto& layer : layers) {
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

// The Linear layers of a transformer as its built model names them, enumerated from its
// dimensions, and the ones --lora_targets adapts: what the memory estimate counts for LoRA
// without building the model (lora.h attaches the adapters to a built one by the same rule).
#pragma once

#include "ampt/config/config.h"
#include "ampt/models/memory_estimate.h"

#include <string>
#include <vector>

namespace ampt::models {

// Every block Linear of a GPT or Llama, in module order ("h.0.attn.c_attn", "h.0.attn.c_proj",
// "h.0.mlp.c_fc", ...; "layers.0.self_attn.q_proj", ...); the head and the embeddings are never
// adapted and are not listed. Empty for other families.
std::vector<LinearLayer> linear_layers(const ModelDims& dims);

// config's LoRA settings for a model of `dims`: the targets (--lora_targets, else the family's
// default) resolved to the layers they name. Rank 0: inactive. Throws UsageError, as training
// does, for a family that takes no adapters and for a target that matches no Linear layer.
LoraDims lora_dims(const config::Config& config, const ModelDims& dims);

}  // namespace ampt::models

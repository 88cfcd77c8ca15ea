// The Linear layers --lora_targets adapts among a transformer's (its layer inventory): what the
// memory estimate counts for LoRA without building the model (lora.h attaches the adapters to a
// built one by the same rule).
#pragma once

#include "ampt/config/config.h"
#include "ampt/models/model_dims.h"


namespace ampt::models {

// config's LoRA settings for a model of `dims`: the targets (--lora_targets, else the family's
// default) resolved to the layers they name. Rank 0: inactive. Throws UsageError, as training
// does, for a family that takes no adapters and for a target that matches no Linear layer.
LoraDims lora_dims(const config::Config& config, const ModelDims& dims);

}  // namespace ampt::models

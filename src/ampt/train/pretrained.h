// Pretrained weights into a model about to train or generate: config.init_from's Hugging Face
// model (its family reads the files) and config.init_adapter's LoRA adapters, checked tensor by
// tensor against the model's own.
#pragma once

#include "ampt/config/config.h"
#include "ampt/core/named_tensors.h"

#include <string>

namespace ampt::train {

// Copies config.init_from's weights into `targets`' tensors that are not LoRA adapters (the
// model's parameters by name: the fp32 masters under O2, a LoRA run's frozen base as it is), and
// config.init_adapter's adapters into its adapters; either may be unset. Returns where they came
// from, for the startup block. Throws RuntimeError naming the file and the tensor when they do
// not fit.
std::string load_pretrained(const config::Config& config, const NamedTensors& targets);

}  // namespace ampt::train

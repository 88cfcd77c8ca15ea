// Pretrained weights into a model about to train or generate: config.init_from's Hugging Face
// model (its family reads the files), checked tensor by tensor against the model's own.
#pragma once

#include "ampt/config/config.h"
#include "ampt/core/named_tensors.h"

#include <string>

namespace ampt::train {

// Copies config.init_from's weights into `targets` (the model's parameters by name: the fp32
// masters under O2). Returns where they came from, for the startup block. Throws RuntimeError
// naming the file and the tensor when they do not fit.
std::string load_pretrained(const config::Config& config, const NamedTensors& targets);

}  // namespace ampt::train

// Pretrained weights into a model about to train or generate: config.init_from's Hugging Face
// model (its family reads the files) and config.init_adapter's LoRA adapters, checked tensor by
// tensor against the model's own.
#pragma once

#include "ampt/config/config.h"
#include "ampt/core/named_tensors.h"
#include "ampt/models/linear.h"
#include "ampt/train/base_fingerprint.h"

#include <map>
#include <string>

namespace ampt::train {

// A LoRA base built as placeholders (models::DeferredWeights for its block Linear weights,
// precision::defer_frozen_parameters for the rest), whose tensors take their values as the files
// are read, one at a time: each in the dtype and on the device of its placeholder, and the block
// Linear weights quantized from there in `format` (auto: held as they are). The dense base is
// never whole.
struct DeferredLoad {
  std::map<std::string, models::LinearImpl*> layers;  // models::awaiting_weights
  config::BaseDtype format = config::BaseDtype::auto_select;
};

struct LoadedWeights {
  std::string description;  // where they came from, for the startup block
  // With a DeferredLoad: the fingerprint's digests of every tensor of the base, taken from the
  // files' values as they passed (the base is held in another dtype, or quantized, after).
  std::map<std::string, TensorDigest> digests;
};

// Copies config.init_from's weights into `targets`' tensors that are not LoRA adapters (the
// model's parameters by name: the fp32 masters under O2, a LoRA run's frozen base as it is), or
// with `deferred` gives its placeholders their values, and config.init_adapter's adapters into
// its adapters; either may be unset. Throws RuntimeError naming the file and the tensor when they
// do not fit.
LoadedWeights load_pretrained(const config::Config& config, const NamedTensors& targets,
                              const DeferredLoad* deferred = nullptr);

}  // namespace ampt::train

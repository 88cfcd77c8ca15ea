// Pretrained weights into a model about to train or generate: config.init_from's Hugging Face
// model (its family reads the files) and config.init_adapter's LoRA adapters, checked tensor by
// tensor against the model's own.
#pragma once

#include "ampt/config/config.h"
#include "ampt/core/named_tensors.h"
#include "ampt/data/dataset.h"
#include "ampt/models/registry.h"
#include "ampt/train/base_fingerprint.h"

#include <torch/nn/module.h>

#include <map>
#include <string>

namespace ampt::train {

// Whether a run of `config` builds its base without values, which load_pretrained gives it as the
// files are read: a LoRA base from --init_from. The dense base is then never whole.
bool base_loads_deferred(const config::Config& config);

// The model of `config` on `device`, seeded with config.seed; a base_loads_deferred base built
// as placeholders (models::DeferredWeights for its block Linear weights,
// precision::defer_frozen_parameters for the rest).
models::Model make_model_to_load(const config::Config& config, const data::DataSpec& spec,
                                 const c10::Device& device);

struct LoadedWeights {
  std::string description;  // where they came from, for the startup block
  // For a base_loads_deferred base: the fingerprint's digests of every tensor of the base, taken
  // from the files' values as they passed (the base is held in another dtype, or quantized,
  // after).
  std::map<std::string, TensorDigest> digests;
};

// Copies config.init_from's weights into `targets`' tensors that are not LoRA adapters (the
// model's parameters by name: the fp32 masters under O2, a LoRA run's frozen base as it is), and
// config.init_adapter's adapters into its adapters; either may be unset. A base_loads_deferred
// base (`model`, from make_model_to_load) takes each tensor as it is read, in the dtype and on
// the device of its placeholder, its block Linear weights quantized from there in
// config.base_dtype (auto: held as they are). Throws RuntimeError naming the file and the tensor
// when they do not fit.
LoadedWeights load_pretrained(const config::Config& config, const NamedTensors& targets,
                              torch::nn::Module& model);

}  // namespace ampt::train

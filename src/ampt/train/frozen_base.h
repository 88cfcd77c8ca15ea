// A LoRA run's frozen base, the part of the run beside its TrainState: no optimizer steps it and
// no checkpoint holds it; a checkpoint names it by its fingerprint.
#pragma once

#include "ampt/config/config.h"
#include "ampt/precision/precision_state.h"
#include "ampt/train/base_fingerprint.h"

#include <torch/nn/module.h>
#include <torch/types.h>

#include <map>
#include <string>
#include <vector>

namespace ampt::train {

struct FrozenBase {
  std::string fingerprint;  // base_fingerprint.h; empty: no LoRA
  std::string note;         // the startup's [LoRA] line; empty: no LoRA
};

// Under LoRA: fingerprints the frozen base (before it is held in a half dtype or quantized, so
// that any precision resumes from any other), then stores it in the precision's frozen dtype and
// with --base_dtype nf4 or int8 quantizes `model`'s frozen block Linear weights. `trained`: the
// adapters; `digests`: the base's tensors digested as they loaded (load_pretrained).
// Without LoRA an empty FrozenBase, and nothing changes.
FrozenBase freeze_base(const config::Config& config, precision::PrecisionState& precision,
                       const std::vector<torch::Tensor>& trained, torch::nn::Module& model,
                       const std::map<std::string, TensorDigest>& digests);

}  // namespace ampt::train

// The model families ampt builds, as one table: each entry says what --model names build it,
// what it consumes (the data layer's sample request), how it is built, its dimensions for the
// memory estimate, and what the rest of ampt may do with it (Hugging Face import and export,
// generation, transformer-block features). The rest of ampt asks this table, never a model's
// name. Adding a family: src/ampt/models/README.md.
#pragma once

#include "ampt/config/config.h"
#include "ampt/data/dataset.h"
#include "ampt/data/sample_request.h"
#include "ampt/models/memory_estimate.h"
#include "ampt/models/registry.h"

#include <string>
#include <string_view>
#include <vector>

namespace ampt::models {

struct ModelFamily {
  std::string name;                  // the family's own --model value: "gpt"
  std::vector<std::string> presets;  // further --model values that build it, with fixed sizes
  // What a model of `config` consumes, for the data layer (its settings' own errors first).
  data::SampleRequest (*sample_request)(const config::Config& config);
  // The model, initialised from the torch seed the caller set, for data of `spec`.
  Model (*build)(const config::Config& config, const data::DataSpec& spec);
  // What the memory estimate needs: `input_shape` empty and `seq_len` 0 mean the defaults.
  ModelDims (*memory_dims)(const config::Config& config, std::vector<int64_t> input_shape,
                           int64_t seq_len);
  // A language model: token windows in, next-token logits out (text data, perplexity).
  bool language_model = false;
  // Built of transformer blocks: activation checkpointing and fp8 Linear layers apply, and on
  // a GPU the fused kernels (kernels/kernel_support).
  bool transformer_blocks = false;
  // Convolutions that train faster with channels-last weights on a CPU (--channels_last).
  bool channels_last = false;
  // --init_from loads Hugging Face weights into it; `ampt export --format hf` writes them;
  // `ampt generate` continues a prompt with it.
  bool pretrained = false;
  bool hf_export = false;
  bool generation = false;
};

// In the order `--model`'s choices list them.
const std::vector<ModelFamily>& model_families();

// Every --model value: each family's name, then its presets.
std::vector<std::string> model_names();

// The family --model `model` builds, or nullptr.
const ModelFamily* find_family(std::string_view model);

// The family of config.model; UsageError "unknown model 'x': expected one of ..." when none.
const ModelFamily& family_of(const config::Config& config);

// The families' entries (each in its <family>_family.cpp).
ModelFamily mlp_family();
ModelFamily cnn_family();
ModelFamily gpt_family();

}  // namespace ampt::models

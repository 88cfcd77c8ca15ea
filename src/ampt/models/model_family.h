// The model families ampt builds, as one table: each entry says what --model names build it,
// what it consumes (the data layer's sample request), how it is built, its dimensions for the
// memory estimate, and what the rest of ampt may do with it (Hugging Face import and export,
// generation, transformer-block features). The rest of ampt asks this table, never a model's
// name. Adding a family: src/ampt/models/README.md.
#pragma once

#include "ampt/config/config.h"
#include "ampt/core/named_tensors.h"
#include "ampt/data/dataset.h"
#include "ampt/data/sample_request.h"
#include "ampt/hf/pretrained.h"
#include "ampt/models/model_dims.h"
#include "ampt/models/registry.h"

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ampt::models {

// --init_from's weights in the family's own parameter names, float32, and where they came from.
struct PretrainedWeights {
  NamedTensors tensors;
  std::string description;  // for the startup block
};

// What `ampt export --format hf` hands a family: a checkpoint's weights and its run's settings.
struct HfExport {
  std::string dir;
  const config::Config* config = nullptr;  // the run's, as its checkpoint recorded it
  NamedTensors weights;
  // The run's tokenizer files (--tokenizer, else init_from's directory), if it had any.
  std::optional<std::string> tokenizer_path;
  std::map<std::string, std::string> metadata;  // into the safetensors header
};

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
  // LoRA (lora.h): the Linear layers adapted when --lora_targets is not given, as peft's
  // defaults for the architecture; empty: the family takes no adapters. `hf_module_prefix` turns
  // a module name into the Hugging Face model's ("h.0.attn.c_attn" → "transformer.h.0.attn.c_attn")
  // and `hf_transposed` says its Linears are stored [in, out] (GPT-2's Conv1D: peft's
  // fan_in_fan_out).
  std::vector<std::string> lora_targets;
  std::string hf_module_prefix;
  bool hf_transposed = false;
  // With `pretrained`: config.json's model_type values it loads, each with the --model value
  // that builds it ("" for a config.json without one).
  std::map<std::string, std::string> hf_model_types;
  // With `pretrained`: gives `sink` config.init_from's tensors (hf/) in the family's parameter
  // names as they are read, one at a time where the family's format allows, and returns where
  // they came from for the startup block; one RuntimeError line naming the file and tensor that
  // do not fit.
  std::string (*load_pretrained)(const config::Config& config,
                                 const hf::TensorSink& sink) = nullptr;
  // With `hf_export`: writes the Hugging Face directory; returns the files written, for the
  // command's one line.
  std::string (*write_hf)(const HfExport& request) = nullptr;
};

// config.init_from's weights all at once (ModelFamily::load_pretrained), float32.
PretrainedWeights pretrained_weights(const config::Config& config);

// In the order `--model`'s choices list them.
const std::vector<ModelFamily>& model_families();

// Every --model value: each family's name, then its presets.
std::vector<std::string> model_names();

// The model kinds built of transformer blocks: each such family's name and the models it loads
// from Hugging Face ("gpt", "llama", "mistral", ...), for messages where blocks are needed.
std::vector<std::string> transformer_model_kinds();

// The family --model `model` builds, or nullptr.
const ModelFamily* find_family(std::string_view model);

// The family of config.model; UsageError "unknown model 'x': expected one of ..." when none.
const ModelFamily& family_of(const config::Config& config);

// The families' entries (each in its <family>_family.cpp).
ModelFamily mlp_family();
ModelFamily cnn_family();
ModelFamily gpt_family();
ModelFamily llama_family();

}  // namespace ampt::models

// Where a pretrained Hugging Face GPT-2 lives on this machine: `--init_from` as a directory, or as
// a model name (gpt2, gpt2-medium, openai-community/gpt2, ...) found in the hub cache that
// huggingface_hub itself fills (models--ORG--NAME/snapshots/REVISION/). Nothing is downloaded.
#pragma once

#include "ampt/config/config.h"

#include <string>
#include <vector>

namespace ampt::hf {

// The snapshot directory `init_from` names. A path to an existing directory is taken as it is;
// otherwise the name is looked up in `hub_cache` (config.hf_hub_cache): the bare GPT-2 names
// also under openai-community/, the revision refs/main points at, else the only (or newest)
// snapshot. Throws RuntimeError naming what was searched when nothing is found.
std::string pretrained_dir(const std::string& init_from, const std::string& hub_cache);

// The model files in a pretrained directory.
struct ModelFiles {
  std::string dir;
  std::string config_json;           // dir/config.json
  std::vector<std::string> weights;  // model.safetensors, or the shards its index lists
};

// Checks that `dir` holds config.json and safetensors weights (a single file or a sharded index).
// A directory with only pytorch_model.bin (a pickle) is refused with the command that converts
// it; anything missing is one RuntimeError line naming the file.
ModelFiles model_files(const std::string& dir);

// pretrained_dir(config.init_from, config.hf_hub_cache), then model_files of it.
ModelFiles pretrained_files(const config::Config& config);

}  // namespace ampt::hf

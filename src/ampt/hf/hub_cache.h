// Where a pretrained Hugging Face model lives on this machine: `--init_from` as a directory, or a
// name found in the hub cache that huggingface_hub itself fills (models--ORG--NAME/snapshots/
// REVISION/). Nothing is downloaded.
#pragma once

#include <string>
#include <string_view>

namespace ampt::hf {

// The snapshot directory `init_from` names. A path to an existing directory is taken as it is;
// otherwise the name is looked up in `hub_cache` (config.hf_hub_cache): the bare GPT-2 names
// also under openai-community/, the revision refs/main points at, else the newest snapshot.
// Throws RuntimeError naming `option` (the setting that named it), `init_from` and what was
// searched when nothing is found.
std::string pretrained_dir(const std::string& init_from, const std::string& hub_cache,
                           std::string_view option = "init_from");

}  // namespace ampt::hf

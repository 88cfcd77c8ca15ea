// A trained model rebuilt for the commands that use one outside training (generate, export's
// checks): the configuration its checkpoint's run trained with, and the model with its weights.
#pragma once

#include "ampt/checkpoint/checkpoint.h"
#include "ampt/commands/command.h"
#include "ampt/config/config.h"
#include "ampt/models/registry.h"

#include <optional>
#include <string>
#include <vector>

namespace ampt::commands {

// The run's recorded settings, then `flags` (and the environment) over them; without `saved`,
// the flags alone.
config::Config run_config(const std::optional<checkpoint::Checkpoint>& saved,
                          const std::vector<std::string>& flags, const Environment& env);

// The GPT of `config` on `device`, in eval mode, holding `saved`'s weights (checkpoint_path names
// it in errors), else config.init_from's pretrained ones.
models::Model load_run_model(const config::Config& config,
                             const std::optional<checkpoint::Checkpoint>& saved,
                             const std::string& checkpoint_path, const torch::Device& device);

}  // namespace ampt::commands

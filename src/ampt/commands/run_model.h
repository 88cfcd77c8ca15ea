// A trained model rebuilt for the commands that use one outside training (generate, export's
// checks): the configuration its checkpoint's run trained with, the model with its weights, and
// for generation that model as the run computed with it (train::Policy).
#pragma once

#include "ampt/checkpoint/checkpoint.h"
#include "ampt/commands/command.h"
#include "ampt/config/config.h"
#include "ampt/models/registry.h"
#include "ampt/train/policy.h"

#include <memory>
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

// load_run_model's model as its run computes with it: under the run's precision (the stage
// `saved` was in, for a precision schedule), its fp32 islands, O1's half working weights or O2's
// half weights, and a LoRA base held in the dtype training holds it in. Throws where `device`
// cannot give the run's precision (precision::PrecisionState).
std::unique_ptr<train::Policy> load_run_policy(const config::Config& config,
                                               const std::optional<checkpoint::Checkpoint>& saved,
                                               const std::string& checkpoint_path,
                                               const torch::Device& device);

}  // namespace ampt::commands

// `ampt doctor`: what this machine can train with, and why: versions, the CPU's bf16/fp16
// instructions, each visible GPU's capability and which fused paths run on it (each probed and
// self-checked against ATen), and the precision `auto` would pick. The first command to run on a
// new cluster.
#pragma once

#include "ampt/commands/command.h"

namespace ampt::commands {

// Prints the report; returns 0 when `ampt train` can run here (on the CPU when no GPU is
// visible), 1 when a visible GPU cannot run LibTorch.
int run_doctor(const std::vector<std::string>& args, const Environment& env);

std::string doctor_help();

}  // namespace ampt::commands

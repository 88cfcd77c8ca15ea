// `ampt train`: resolve the configuration, attach the console and metrics observers (rank 0
// only), watch for preemption signals and run the training loop.
#pragma once

#include "ampt/commands/command.h"

namespace ampt::commands {

// Stopped by a preemption signal after saving: the sbatch script requeues the job on this status
// (EX_TEMPFAIL: "try again later").
constexpr int kRequeue = 75;
// Stopped by SIGINT after saving.
constexpr int kInterrupted = 130;

std::string train_help();
// 0 when training finished; kRequeue or kInterrupted when a signal stopped it after saving.
int run_train(const std::vector<std::string>& args, const Environment& env);

}  // namespace ampt::commands

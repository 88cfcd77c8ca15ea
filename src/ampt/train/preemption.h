// Turns the signals a cluster sends before stopping a job into a request to save and exit.
#pragma once

#include <string_view>

namespace ampt::train {

// While alive, SIGTERM, SIGINT and `extra_signal` (Slurm's `--signal`, SIGUSR1 by default) only
// record that a stop was asked for: the training loop finishes its step, saves and returns.
// A second SIGINT exits at once (status 130) for a user who does not want to wait.
// Previous handlers are restored on destruction. One watch at a time per process.
class PreemptionWatch {
 public:
  explicit PreemptionWatch(int extra_signal);
  ~PreemptionWatch();
  PreemptionWatch(const PreemptionWatch&) = delete;
  PreemptionWatch& operator=(const PreemptionWatch&) = delete;

  // 0 while no stop was asked for, else the number of the first signal that asked.
  static int requested();
};

// "SIGUSR1" → SIGUSR1; -1 for a name it does not know.
int signal_number(std::string_view name);
// SIGTERM → "SIGTERM".
const char* signal_name(int signal);

}  // namespace ampt::train

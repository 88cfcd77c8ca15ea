#include "ampt/train/preemption.h"

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <utility>

namespace ampt::train {
namespace {

std::atomic<int> g_requested{0};
constexpr std::pair<int, const char*> kSignals[] = {
    {SIGTERM, "SIGTERM"}, {SIGINT, "SIGINT"}, {SIGUSR1, "SIGUSR1"}, {SIGUSR2, "SIGUSR2"},
    {SIGHUP, "SIGHUP"}};

// Only async-signal-safe work here: an atomic store, write(2) and _exit(2).
void on_signal(int signal) {
  int expected = 0;
  if (g_requested.compare_exchange_strong(expected, signal)) {
    constexpr char kMessage[] = "\nampt: stop requested: finishing this step, then saving\n";
    [[maybe_unused]] auto n = ::write(STDERR_FILENO, kMessage, sizeof kMessage - 1);
  } else if (signal == SIGINT) {
    constexpr char kMessage[] = "\nampt: second SIGINT: exiting without saving\n";
    [[maybe_unused]] auto n = ::write(STDERR_FILENO, kMessage, sizeof kMessage - 1);
    ::_exit(130);
  }
}

struct sigaction g_previous[3];
int g_watched[3];

}  // namespace

PreemptionWatch::PreemptionWatch(int extra_signal) {
  g_requested = 0;
  g_watched[0] = SIGTERM;
  g_watched[1] = SIGINT;
  g_watched[2] = extra_signal;
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  for (int i = 0; i < 3; ++i) sigaction(g_watched[i], &action, &g_previous[i]);
}

PreemptionWatch::~PreemptionWatch() {
  for (int i = 2; i >= 0; --i) sigaction(g_watched[i], &g_previous[i], nullptr);
}

int PreemptionWatch::requested() { return g_requested.load(); }

int signal_number(std::string_view name) {
  for (const auto& [number, spelling] : kSignals) {
    if (name == spelling) return number;
  }
  return -1;
}

const char* signal_name(int signal) {
  for (const auto& [number, spelling] : kSignals) {
    if (signal == number) return spelling;
  }
  return "signal";
}

}  // namespace ampt::train

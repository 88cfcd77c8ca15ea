#include "ampt/log/logger.h"

#include <cstdio>
#include <mutex>

namespace ampt::log {
namespace {

struct State {
  std::mutex mutex;
  bool debug = false;
  std::string status;
};

State& state() {
  static State s;
  return s;
}

// Callers hold the mutex.
void clear_status(const State& s) {
  if (!s.status.empty()) std::fputs("\r\033[2K", stdout);
}

void draw_status(const State& s) {
  if (s.status.empty()) return;
  std::fputs(s.status.c_str(), stdout);
  std::fflush(stdout);
}

void write_to(std::FILE* stream, std::string_view line) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  clear_status(s);
  std::fwrite(line.data(), 1, line.size(), stream);
  std::fputc('\n', stream);
  std::fflush(stream);
  draw_status(s);
}

}  // namespace

void set_debug(bool enabled) { state().debug = enabled; }
bool debug_enabled() { return state().debug; }

void write_line(std::string_view line) { write_to(stdout, line); }
void write_warning(std::string_view line) { write_to(stderr, line); }

void set_status_line(std::string_view line) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  clear_status(s);
  s.status = line;
  if (s.status.empty()) std::fflush(stdout);
  draw_status(s);
}

}  // namespace ampt::log

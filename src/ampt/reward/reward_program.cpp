#include "ampt/reward/reward_program.h"

#include "ampt/core/errors.h"
#include "ampt/text/jinja_value.h"
#include "ampt/text/utf8.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <pthread.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <thread>
#include <utility>

extern char** environ;

namespace ampt::reward {
namespace {

using Clock = std::chrono::steady_clock;

// An answer longer than this without a newline is a program writing something else.
constexpr std::size_t kMaxAnswerBytes = std::size_t{16} << 20;

// The request, written by the JSON writer ampt's chat templates use (text/jinja_value.h's
// to_json, which escapes newlines, so the request is one line).
std::string request_line(const JsonValue& prompt, const std::vector<std::string>& completions,
                         const JsonValue& record) {
  using text::jinja::Value;
  text::jinja::ValueList texts;
  texts.reserve(completions.size());
  for (const auto& completion : completions) texts.push_back(Value::string(text::replace_invalid_utf8(completion)));
  text::jinja::ValueDict request;
  request.set(Value::string("prompt"), Value::from_json(prompt));
  request.set(Value::string("completions"), Value::list(std::move(texts)));
  request.set(Value::string("record"), Value::from_json(record));
  return text::jinja::to_json(Value::dict(std::move(request))) + "\n";
}

// The start of an answer, for an error line.
std::string excerpt(std::string_view answer) {
  constexpr std::size_t shown = 200;
  return answer.size() <= shown ? std::string(answer) : std::string(answer.substr(0, shown)) + "...";
}

// SIGPIPE held back in this thread while it writes to the program, so that a program that has
// exited makes write() fail with EPIPE instead of killing ampt; a SIGPIPE the write raised is
// taken before the mask is restored.
class PipeSignalHeld {
 public:
  PipeSignalHeld() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_, &previous_);
  }
  ~PipeSignalHeld() {
    if (raised_) {
      const timespec now{0, 0};
      while (sigtimedwait(&pipe_, nullptr, &now) > 0) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
  }
  PipeSignalHeld(const PipeSignalHeld&) = delete;
  PipeSignalHeld& operator=(const PipeSignalHeld&) = delete;
  void raised() { raised_ = true; }

 private:
  sigset_t pipe_{};
  sigset_t previous_{};
  bool raised_ = false;
};

int milliseconds_until(Clock::time_point deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, 1 << 30));
}

std::string errno_text(int error) { return std::strerror(error); }

// How the child `pid` ended, waiting up to `grace` and leaving it unreaped; si_pid is 0 while it
// runs.
siginfo_t ended_within(pid_t pid, std::chrono::milliseconds grace) {
  const auto until = Clock::now() + grace;
  for (;;) {
    siginfo_t info{};
    if (waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid != 0 ||
        Clock::now() >= until) {
      return info;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace

RewardProgram::RewardProgram(std::string command, double timeout_seconds)
    : command_(std::move(command)), timeout_seconds_(timeout_seconds) {
  int to[2];
  int from[2];
  if (pipe2(to, O_CLOEXEC) != 0) {
    throw RuntimeError(fmt::format("reward program \"{}\": cannot make a pipe: {}", command_, errno_text(errno)));
  }
  if (pipe2(from, O_CLOEXEC) != 0) {
    const int error = errno;
    close(to[0]);
    close(to[1]);
    throw RuntimeError(fmt::format("reward program \"{}\": cannot make a pipe: {}", command_, errno_text(error)));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, to[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, from[1], STDOUT_FILENO);
  // None of ampt's files, sockets or devices stays open in the program.
  posix_spawn_file_actions_addclosefrom_np(&actions, STDERR_FILENO + 1);
  // Its own process group, so that killing it reaches what the shell started; default signal
  // handling and no blocked signals, whatever ampt set for its own.
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t defaults;
  sigemptyset(&defaults);
  for (const int signal : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCHLD, SIGALRM}) {
    sigaddset(&defaults, signal);
  }
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attributes, &defaults);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setpgroup(&attributes, 0);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  std::string shell = "/bin/sh";
  std::string dash_c = "-c";
  char* argv[] = {shell.data(), dash_c.data(), command_.data(), nullptr};
  const int rc = posix_spawn(&pid_, shell.c_str(), &actions, &attributes, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  close(to[0]);
  close(from[1]);
  if (rc != 0) {
    close(to[1]);
    close(from[0]);
    throw RuntimeError(fmt::format("reward program \"{}\": cannot start /bin/sh: {}", command_, errno_text(rc)));
  }
  running_ = true;
  to_child_ = to[1];
  from_child_ = from[0];
  // A program that stops reading must not block ampt past the time-out.
  fcntl(to_child_, F_SETFL, fcntl(to_child_, F_GETFL) | O_NONBLOCK);
}

RewardProgram::~RewardProgram() { stop(std::chrono::seconds(1)); }

void RewardProgram::stop(std::chrono::milliseconds grace) {
  if (to_child_ >= 0) close(to_child_);
  to_child_ = -1;
  if (running_) {
    // Waited for without reaping: until the shell is reaped its process group's id cannot be
    // taken by another process, so the kill below reaches only the program's own.
    ended_within(pid_, grace);
    kill(-pid_, SIGKILL);
    while (waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
    running_ = false;
  }
  if (from_child_ >= 0) close(from_child_);
  from_child_ = -1;
}

std::string RewardProgram::how_it_ended() {
  // The program's end is what ended its output: a second lets it finish exiting.
  const siginfo_t info = ended_within(pid_, std::chrono::seconds(1));
  if (info.si_pid == 0) return "it closed its output";
  if (info.si_code == CLD_EXITED) {
    return fmt::format("it exited with status {}{}", info.si_status,
                       info.si_status == 127 ? " (/bin/sh's status for a command it cannot find)" : "");
  }
  return fmt::format("it was killed by signal {} ({})", info.si_status, strsignal(info.si_status));
}

void RewardProgram::fail(std::string_view where, const std::string& what) {
  stop(std::chrono::milliseconds(0));
  failure_ = what;
  throw RuntimeError(fmt::format("reward program \"{}\": {}: {}", command_, where, what));
}

void RewardProgram::write_request(const std::string& request, Deadline deadline, std::string_view where) {
  PipeSignalHeld held;
  for (std::size_t done = 0; done < request.size();) {
    const ssize_t n = write(to_child_, request.data() + done, request.size() - done);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && errno == EAGAIN) {
      if (Clock::now() >= deadline) {
        fail(where, fmt::format("it read no request within {} s (the reward time-out), and was stopped",
                                       timeout_seconds_));
      }
      pollfd fd{to_child_, POLLOUT, 0};
      poll(&fd, 1, milliseconds_until(deadline));
    } else if (n < 0 && errno == EPIPE) {
      held.raised();
      fail(where, how_it_ended() + " before answering");
    } else {
      fail(where, "writing its request failed: " + errno_text(errno));
    }
  }
}

std::string RewardProgram::read_answer(Deadline deadline, std::string_view where) {
  char buffer[65536];
  for (;;) {
    if (const std::size_t newline = pending_.find('\n'); newline != std::string::npos) {
      std::string line = pending_.substr(0, newline);
      pending_.erase(0, newline + 1);
      if (line.ends_with('\r')) line.pop_back();
      return line;
    }
    if (pending_.size() > kMaxAnswerBytes) {
      fail(where, fmt::format("its answer runs past {} MiB without a newline: {}", kMaxAnswerBytes >> 20,
                                     excerpt(pending_)));
    }
    if (Clock::now() >= deadline) {
      fail(where,
           fmt::format("no answer within {} s (the reward time-out); the program was stopped", timeout_seconds_));
    }
    pollfd fd{from_child_, POLLIN, 0};
    const int ready = poll(&fd, 1, milliseconds_until(deadline));
    if (ready < 0 && errno != EINTR) fail(where, "waiting for its answer failed: " + errno_text(errno));
    if (ready <= 0) continue;
    const ssize_t n = read(from_child_, buffer, sizeof buffer);
    if (n > 0) {
      pending_.append(buffer, static_cast<std::size_t>(n));
    } else if (n == 0) {
      fail(where, how_it_ended() + " before answering");
    } else if (errno != EINTR && errno != EAGAIN) {
      fail(where, "reading its answer failed: " + errno_text(errno));
    }
  }
}

std::vector<double> RewardProgram::score(const JsonValue& prompt, const std::vector<std::string>& completions,
                                         const JsonValue& record, std::string_view where) {
  if (!failure_.empty()) {
    throw RuntimeError(fmt::format("reward program \"{}\": {}: not scored: the program was stopped after "
                                   "an earlier error ({})",
                                   command_, where, failure_));
  }
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_seconds_));
  write_request(request_line(prompt, completions, record), deadline, where);
  const std::string line = read_answer(deadline, where);
  JsonValue answer;
  try {
    answer = parse_json(line);
  } catch (const JsonError& e) {
    fail(where, fmt::format("its answer is not JSON ({}): {}; each answer is one line {{\"rewards\": "
                                   "[...]}} (anything else goes to stderr)",
                                   e.what(), excerpt(line)));
  }
  const JsonValue* rewards = answer.find("rewards");
  if (rewards == nullptr || rewards->kind != JsonValue::Kind::array) {
    fail(where, fmt::format("its answer has no \"rewards\" array: {}", excerpt(line)));
  }
  if (rewards->items.size() != completions.size()) {
    fail(where, fmt::format("it answered {} rewards for {} completions: {}", rewards->items.size(),
                                   completions.size(), excerpt(line)));
  }
  std::vector<double> values;
  values.reserve(rewards->items.size());
  for (std::size_t i = 0; i < rewards->items.size(); ++i) {
    const JsonValue& item = rewards->items[i];
    if (item.kind != JsonValue::Kind::number) {
      fail(where, fmt::format("reward {} of its answer is {}, not a number: {}", i, item.kind_name(),
                                     excerpt(line)));
    }
    values.push_back(item.number);
  }
  if (pending_.find_first_not_of(" \t\r\n") != std::string::npos) {
    fail(where,
         fmt::format("it answered more than one line; the next: {}", excerpt(pending_.substr(0, pending_.find('\n')))));
  }
  return values;
}

}  // namespace ampt::reward

// The external reward program: a Python program as a user writes one (programs/score.py) scores
// group after group in one process, sent each completion whole (newlines, quotes, non-ASCII,
// ill-formed UTF-8 as U+FFFD); and each way a program can fail is one line naming the record,
// after which the program (its shell and what the shell started) is gone and reaped: a crash
// (an exit status, a signal, a command /bin/sh cannot find, an exit before the request is
// written, which would raise SIGPIPE), a hang past a 1 s time-out (not answering, or not
// reading), an answer that is not JSON, one without "rewards", a wrong count, a reward that is
// not a number, two lines for one request.
#include "ampt/core/errors.h"
#include "ampt/core/json_reader.h"
#include "ampt/reward/reward_program.h"
#include "support/process.h"

#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

using ampt::JsonValue;
using ampt::parse_json;
using ampt::reward::RewardProgram;

namespace {

const std::string kScore = std::string("'") + AMPT_PYTHON + "' '" + AMPT_SOURCE_DIR "/tests/reward/programs/score.py'";

const JsonValue kRecord = parse_json(R"({"prompt": "What is 2+2?", "answer": 4, "id": "q1"})");

// Whether the process is gone: no such process, or a zombie that its new parent has yet to reap.
bool gone(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  const std::size_t close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z';
}

// The program's own child was reaped by us: waitpid finds nothing to wait for.
bool reaped(pid_t pid) { return waitpid(pid, nullptr, WNOHANG) < 0 && errno == ECHILD; }

// What one scoring call of `command` throws, with the program then checked gone and reaped.
std::string failure(const std::string& command, const std::vector<std::string>& completions = {"4", "5"},
                    double timeout = 10) {
  RewardProgram program(command, timeout);
  const pid_t pid = program.pid();
  std::string message = "no error";
  try {
    program.score(*kRecord.find("prompt"), completions, kRecord, "record 17");
  } catch (const ampt::RuntimeError& e) {
    message = e.what();
  }
  CHECK(reaped(pid));
  CHECK(gone(pid));
  // Every later call is refused, naming the first error.
  CHECK_THROWS_WITH(program.score(*kRecord.find("prompt"), completions, kRecord, "record 18"),
                    Catch::StartsWith("reward program \"" + command + "\": record 18: not scored: the program was "
                                      "stopped after an earlier error ("));
  return message;
}

std::string prefix(const std::string& command) { return "reward program \"" + command + "\": record 17: "; }

}  // namespace

TEST_CASE("reward: the reward program scores group after group in one process, each text whole", "[reward]") {
  {
    RewardProgram program(kScore, 30);
    const std::vector<std::string> completions = {"4", "It is 4.\n\"Four\", I think", "caf\xC3\xA9 \xE2\x9C\x93",
                                                  "caf\xC3", ""};
    const auto rewards = program.score(*kRecord.find("prompt"), completions, kRecord, "record 0");
    // The lengths Python counts: é and ✓ are one character each, the cut \xC3 one U+FFFD.
    REQUIRE(rewards.size() == 5);
    CHECK(rewards[0] == Approx(1.001).epsilon(1e-15));
    CHECK(rewards[1] == Approx(1.0 + 24 / 1000.0).epsilon(1e-15));
    CHECK(rewards[2] == Approx(6 / 1000.0).epsilon(1e-15));
    CHECK(rewards[3] == Approx(4 / 1000.0).epsilon(1e-15));
    CHECK(rewards[4] == 0.0);
    const auto record = parse_json(R"({"prompt": [{"role": "user", "content": "3+3?"}], "answer": "6"})");
    const auto chat = program.score(*record.find("prompt"), {"6", "7"}, record, "record 1");
    REQUIRE(chat.size() == 2);
    CHECK(chat[0] == Approx(1.001).epsilon(1e-15));
    CHECK(chat[1] == Approx(0.001).epsilon(1e-15));
  }
  const std::string count = kScore + " count";
  RewardProgram program(count, 30);
  const pid_t pid = program.pid();
  for (int call = 0; call < 3; ++call) {
    CHECK(program.score(*kRecord.find("prompt"), {"a", "b", "c"}, kRecord, "record " + std::to_string(call)) ==
          std::vector<double>(3, static_cast<double>(call)));
  }
  CHECK(program.pid() == pid);
}

TEST_CASE("reward: a reward program that crashes is one line naming the record, and is reaped", "[reward][errors]") {
  CHECK(failure("read line; echo 'score.py: no model' >&2; exit 3") ==
        prefix("read line; echo 'score.py: no model' >&2; exit 3") + "it exited with status 3 before answering");
  CHECK(failure("read line; kill -9 $$") == prefix("read line; kill -9 $$") +
                                               "it was killed by signal 9 (Killed) before answering");
  CHECK(failure("no_such_reward_program_66") ==
        prefix("no_such_reward_program_66") +
            "it exited with status 127 (/bin/sh's status for a command it cannot find) before answering");
  // Gone before its request is written: the write fails with EPIPE, and the SIGPIPE it raises
  // does not end the test.
  {
    RewardProgram program("exit 4", 10);
    siginfo_t info{};
    REQUIRE(ampt::test::wait_until(
        [&] {
          info = {};
          return waitid(P_PID, static_cast<id_t>(program.pid()), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
                 info.si_pid != 0;
        },
        10.0));
    CHECK_THROWS_WITH(program.score(*kRecord.find("prompt"), {"4"}, kRecord, "record 17"),
                      prefix("exit 4") + "it exited with status 4 before answering");
  }
}

TEST_CASE("reward: a reward program past its time-out is stopped, with its children, in one line",
          "[reward][errors]") {
  const std::string dir = ampt::test::make_temp_dir();
  const std::string hang = "sleep 60 & echo $! > '" + dir + "/child'; wait";
  const auto start = std::chrono::steady_clock::now();
  CHECK(failure(hang, {"4"}, 1) == prefix(hang) + "no answer within 1 s (the reward time-out); the program was stopped");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(seconds >= 1.0);
  CHECK(seconds < 5.0);
  const pid_t child = std::stoi(ampt::test::read_file(dir + "/child"));
  CHECK(ampt::test::wait_until([&] { return gone(child); }, 10.0));
  // A program that never reads: a request past the pipe's 64 KiB cannot be written.
  CHECK(failure("sleep 60", {std::string(1 << 20, 'x')}, 1) ==
        prefix("sleep 60") + "it read no request within 1 s (the reward time-out), and was stopped");
}

TEST_CASE("reward: a reward program's malformed answer or wrong count is one line naming the record",
          "[reward][errors]") {
  const auto answering = [](const std::string& answer) { return "read line; echo '" + answer + "'; sleep 60"; };
  CHECK(failure(answering("hello")) ==
        prefix(answering("hello")) + "its answer is not JSON (expected a value at byte 0): hello; each answer "
                                     "is one line {\"rewards\": [...]} (anything else goes to stderr)");
  CHECK(failure(answering("{\"rewards\": [1, 0")) ==
        prefix(answering("{\"rewards\": [1, 0")) + "its answer is not JSON (unexpected end of the file (truncated?) at byte 17): "
                                                   "{\"rewards\": [1, 0; each answer is one line {\"rewards\": [...]} "
                                                   "(anything else goes to stderr)");
  CHECK(failure(answering("{\"score\": [1, 0]}")) ==
        prefix(answering("{\"score\": [1, 0]}")) + "its answer has no \"rewards\" array: {\"score\": [1, 0]}");
  CHECK(failure(answering("[1, 0]")) == prefix(answering("[1, 0]")) + "its answer has no \"rewards\" array: [1, 0]");
  CHECK(failure(answering("{\"rewards\": [1]}")) ==
        prefix(answering("{\"rewards\": [1]}")) + "it answered 1 rewards for 2 completions: {\"rewards\": [1]}");
  CHECK(failure(answering("{\"rewards\": [1, \"a\"]}")) ==
        prefix(answering("{\"rewards\": [1, \"a\"]}")) +
            "reward 1 of its answer is a string, not a number: {\"rewards\": [1, \"a\"]}");
  // Both lines in one write, so that both have arrived when the first is read.
  const std::string twice = "read line; printf '{\"rewards\": [1, 0]}\\n{\"rewards\": [1, 0]}\\n'; sleep 60";
  CHECK(failure(twice) == prefix(twice) + "it answered more than one line; the next: {\"rewards\": [1, 0]}");
}

TEST_CASE("reward: a reward program goes with its object, also one that ignores the end of its input",
          "[reward]") {
  pid_t pid = -1;
  {
    RewardProgram program(kScore, 30);
    pid = program.pid();
    CHECK(program.score(*kRecord.find("prompt"), {"4"}, kRecord, "record 0").at(0) == Approx(1.001).epsilon(1e-15));
  }
  CHECK(reaped(pid));
  const auto start = std::chrono::steady_clock::now();
  {
    RewardProgram program("trap '' TERM; while true; do sleep 0.1; done", 30);
    pid = program.pid();
  }
  CHECK(reaped(pid));
  CHECK(gone(pid));
  // Closing its stdin, it was given a second to exit.
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < 3.0);
}

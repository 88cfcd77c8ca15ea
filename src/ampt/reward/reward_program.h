// The external reward program: one long-lived child (/bin/sh -c COMMAND, in a process group of
// its own) that reads a JSON line per group on its stdin,
//   {"prompt": ..., "completions": ["...", ...], "record": {...}}
// and answers one line on its stdout, {"rewards": [r0, r1, ...]}, a number per completion. Its
// stderr is the run's. A crash, a time-out, an answer that is not that line, or a wrong count is
// a RuntimeError naming the record; the program is then killed and reaped, as it is when this
// object goes.
#pragma once

#include "ampt/core/json_reader.h"

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <vector>

namespace ampt::reward {

class RewardProgram {
 public:
  // Starts the program; throws RuntimeError when the shell cannot be started.
  RewardProgram(std::string command, double timeout_seconds);
  // Closes its stdin, gives it a second to exit, then kills what is left of its process group.
  ~RewardProgram();
  RewardProgram(const RewardProgram&) = delete;
  RewardProgram& operator=(const RewardProgram&) = delete;

  // The program's rewards for one group: `prompt` (the record's, as it is there), its
  // `completions` (ill-formed UTF-8 replaced by U+FFFD, as Python would decode it) and the
  // whole `record`, which errors call `where` ("data/prompts.jsonl: line 7", or "record 17":
  // 'reward program "CMD": WHERE: ...'). Each call has timeout_seconds
  // from sending the request to the end of the answer. After an error every call throws.
  std::vector<double> score(const JsonValue& prompt, const std::vector<std::string>& completions,
                            const JsonValue& record, std::string_view where);

  pid_t pid() const { return pid_; }

 private:
  using Deadline = std::chrono::steady_clock::time_point;
  [[noreturn]] void fail(std::string_view where, const std::string& what);
  std::string how_it_ended();
  void write_request(const std::string& request, Deadline deadline, std::string_view where);
  std::string read_answer(Deadline deadline, std::string_view where);
  void stop(std::chrono::milliseconds grace);

  std::string command_;
  double timeout_seconds_;
  pid_t pid_ = -1;
  bool running_ = false;  // started and not yet reaped
  int to_child_ = -1;
  int from_child_ = -1;
  std::string pending_;  // read past the last answer's newline
  std::string failure_;  // why an earlier call failed; empty while the program runs
};

}  // namespace ampt::reward

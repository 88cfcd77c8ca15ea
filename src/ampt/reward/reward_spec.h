// What the rewards of a run are: the settings the GRPO objective is given (`--reward
// NAME[:WEIGHT],...` and the program's command) and the weighted terms they name.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ampt::reward {

enum class RewardKind { math, exact, format, overlong, program };

// One term of the weighted sum: the log shows its mean as rewards/<name>/mean.
struct RewardTerm {
  RewardKind kind = RewardKind::math;
  std::string name;
  double weight = 1;
};

struct RewardSettings {
  std::string spec;                     // "math,format:0.5"
  std::string answer_field = "answer";  // the record's field that math and exact compare with
  // ECMAScript (std::regex); the whole completion must match it.
  std::string format_pattern = R"(<think>[\s\S]*</think>[\s\S]*)";
  // DAPO's soft overlong punishment: 0 up to max - cache tokens, then down to -1 at max.
  int64_t overlong_max = 0;
  int64_t overlong_cache = 0;
  std::string command;          // the reward program, run by /bin/sh -c; empty for none
  double timeout_seconds = 60;  // for each answer of the program
};

// The terms of `settings.spec` in its order, the program's last when a command is given and the
// spec does not name it (weight 1). Throws UsageError naming the entry, the value and what is
// allowed: an empty or unknown name, a weight that is not a finite number, a name given twice,
// `program` without a command, no reward at all; and bad settings of the terms it names (the
// overlong lengths, a timeout that is not positive; FormatReward checks the pattern).
std::vector<RewardTerm> parse_reward_spec(const RewardSettings& settings);

// "math, exact, format, overlong and program": what a spec may name.
std::string_view reward_names();

}  // namespace ampt::reward

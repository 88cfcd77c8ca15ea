// A run's rewards: the terms of RewardSettings, scored group by group (one prompt record and its
// completions), each completion's weighted sum and every term's own values for the log.
#pragma once

#include "ampt/core/json_reader.h"
#include "ampt/reward/builtin_rewards.h"
#include "ampt/reward/reward_program.h"
#include "ampt/reward/reward_spec.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ampt::reward {

// One prompt and its completions. `record` is the prompt record with every field (the program
// is sent its "prompt" member, null where it has none); `where` is what errors call it: its
// place ("data/prompts.jsonl: line 7", PromptRecord::place) or "record 17".
struct RewardGroup {
  const JsonValue& record;
  std::string_view where;
  const std::vector<std::string>& completions;
  const std::vector<int64_t>& completion_tokens;  // each completion's length, for overlong
};

struct GroupRewards {
  std::vector<double> total;                  // per completion: sum of weight * value
  std::vector<std::vector<double>> by_term;   // [term][completion], in terms() order, unweighted
};

class Rewards {
 public:
  // Parses and checks the settings (parse_reward_spec, FormatReward) and starts the reward
  // program when there is one; throws UsageError or RuntimeError.
  explicit Rewards(const RewardSettings& settings);

  const std::vector<RewardTerm>& terms() const { return terms_; }

  // Throws RuntimeError naming the record when a term cannot score it: math or exact without the
  // answer field, or math with an answer that holds no number. score() checks the same; this is
  // for checking the prompt file before the first step.
  void check_record(const JsonValue& record, std::string_view where) const;

  // Throws RuntimeError naming the record: check_record's errors, the program's, and
  // completion_tokens not one per completion.
  GroupRewards score(const RewardGroup& group);

 private:
  RewardSettings settings_;
  std::vector<RewardTerm> terms_;
  std::optional<FormatReward> format_;
  std::unique_ptr<RewardProgram> program_;
};

}  // namespace ampt::reward

#include "ampt/reward/rewards.h"

#include "ampt/core/errors.h"

#include <fmt/format.h>

namespace ampt::reward {

Rewards::Rewards(const RewardSettings& settings) : settings_(settings), terms_(parse_reward_spec(settings)) {
  for (const auto& term : terms_) {
    if (term.kind == RewardKind::format) format_.emplace(settings_.format_pattern);
    if (term.kind == RewardKind::program) {
      program_ = std::make_unique<RewardProgram>(settings_.command, settings_.timeout_seconds);
    }
  }
}

void Rewards::check_record(const JsonValue& record, std::string_view where) const {
  for (const auto& term : terms_) {
    if (term.kind == RewardKind::math) math_reward("", record, settings_.answer_field, where);
    if (term.kind == RewardKind::exact) record_text(record, settings_.answer_field, "exact", where);
  }
}

GroupRewards Rewards::score(const RewardGroup& group) {
  const auto& completions = group.completions;
  if (group.completion_tokens.size() != completions.size()) {
    throw RuntimeError(fmt::format("{}: {} completion lengths for {} completions", group.where,
                                   group.completion_tokens.size(), completions.size()));
  }
  check_record(group.record, group.where);
  GroupRewards out;
  out.total.assign(completions.size(), 0.0);
  for (const auto& term : terms_) {
    std::vector<double> values;
    if (term.kind == RewardKind::program) {
      static const JsonValue no_prompt;
      const JsonValue* prompt = group.record.find("prompt");
      values = program_->score(prompt != nullptr ? *prompt : no_prompt, completions, group.record,
                               group.where);
    } else {
      for (std::size_t i = 0; i < completions.size(); ++i) {
        switch (term.kind) {
          case RewardKind::math:
            values.push_back(math_reward(completions[i], group.record, settings_.answer_field, group.where));
            break;
          case RewardKind::exact:
            values.push_back(exact_reward(completions[i], group.record, settings_.answer_field, group.where));
            break;
          case RewardKind::format: values.push_back((*format_)(completions[i])); break;
          case RewardKind::overlong:
            values.push_back(
                overlong_penalty(group.completion_tokens[i], settings_.overlong_max, settings_.overlong_cache));
            break;
          case RewardKind::program: break;
        }
      }
    }
    for (std::size_t i = 0; i < completions.size(); ++i) out.total[i] += term.weight * values[i];
    out.by_term.push_back(std::move(values));
  }
  return out;
}

}  // namespace ampt::reward

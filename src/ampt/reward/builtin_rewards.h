// The built-in rewards, each from a completion and its prompt record to a float: math (the
// number it gives against the record's answer), exact (the text against the answer), format (a
// regular expression the whole completion matches) and DAPO's soft overlong punishment.
#pragma once

#include "ampt/core/json_reader.h"

#include <cstddef>
#include <cstdint>
#include <regex>
#include <string>
#include <string_view>

namespace ampt::reward {

// Errors name the record by `where`: its place ("data/prompts.jsonl: line 7", text/
// prompt_records.h's PromptRecord::place) or "record 17".

// The record's `field` as text: a string as it is, a number as JSON writes it. Throws
// RuntimeError "WHERE: reward NAME reads the record's "FIELD", which it lacks (it has: ...)" or
// names the field's kind when it is neither.
std::string record_text(const JsonValue& record, const std::string& field, std::string_view reward,
                        std::string_view where);

// 1 when the number the completion gives (math_answer.h) equals the one the record's `field`
// holds, else 0 (also when the completion gives none). Throws RuntimeError naming the record
// when the field is missing or holds no number.
double math_reward(std::string_view completion, const JsonValue& record, const std::string& field,
                   std::string_view where);

// 1 when the completion equals the record's `field` once both are trimmed of whitespace.
double exact_reward(std::string_view completion, const JsonValue& record, const std::string& field,
                    std::string_view where);

// 1 when the whole completion matches `pattern` (ECMAScript, std::regex_match), else 0; matched
// in time and stack linear in the completion's length, so back-references are refused.
class FormatReward {
 public:
  // Throws UsageError naming the pattern when std::regex refuses it.
  explicit FormatReward(const std::string& pattern);
  double operator()(std::string_view completion) const;

 private:
  std::regex regex_;
};

// DAPO's soft overlong punishment (eq. 13; TRL's get_soft_overlong_punishment): 0 for at most
// max - cache tokens, then (max - cache - tokens) / cache down to -1 at max, and -1 beyond.
// Needs 1 <= cache <= max (parse_reward_spec checks).
double overlong_penalty(int64_t tokens, int64_t max, int64_t cache);

}  // namespace ampt::reward

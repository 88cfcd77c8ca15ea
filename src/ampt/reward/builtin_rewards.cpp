#include "ampt/reward/builtin_rewards.h"

#include "ampt/core/errors.h"
#include "ampt/core/json_text.h"
#include "ampt/reward/math_answer.h"

#include <fmt/format.h>

namespace ampt::reward {
namespace {

std::string_view without_whitespace_around(std::string_view s) {
  constexpr std::string_view whitespace = " \t\n\r\f\v";
  const std::size_t begin = s.find_first_not_of(whitespace);
  if (begin == std::string_view::npos) return {};
  return s.substr(begin, s.find_last_not_of(whitespace) - begin + 1);
}

}  // namespace

std::string record_text(const JsonValue& record, const std::string& field, std::string_view reward,
                        std::string_view where) {
  const JsonValue* value = record.find(field);
  if (value == nullptr) {
    std::string fields;
    for (const auto& [key, member] : record.members) fields += (fields.empty() ? "" : ", ") + key;
    throw RuntimeError(fmt::format("{}: reward {} reads the record's \"{}\", which it lacks (it has: {})",
                                   where, reward, field, fields.empty() ? "no fields" : fields));
  }
  if (value->kind == JsonValue::Kind::string) return value->string;
  if (value->kind == JsonValue::Kind::number) return json_number(value->number);
  throw RuntimeError(fmt::format("{}: reward {} reads the record's \"{}\", which is {}; it must be a string "
                                 "or a number",
                                 where, reward, field, value->kind_name()));
}

double math_reward(std::string_view completion, const JsonValue& record, const std::string& field,
                   std::string_view where) {
  const std::string answer = record_text(record, field, "math", where);
  const auto expected = answer_number(answer);
  if (!expected) {
    throw RuntimeError(fmt::format(
        "{}: reward math: the record's \"{}\", \"{}\", holds no number (an integer, decimal or fraction, "
        "alone, in \\boxed{{}} or after ####); score such answers with exact or a reward program",
        where, field, answer));
  }
  const auto given = completion_number(completion);
  return given && same_number(*given, *expected) ? 1.0 : 0.0;
}

double exact_reward(std::string_view completion, const JsonValue& record, const std::string& field,
                    std::string_view where) {
  const std::string answer = record_text(record, field, "exact", where);
  return without_whitespace_around(completion) == without_whitespace_around(answer) ? 1.0 : 0.0;
}

FormatReward::FormatReward(const std::string& pattern) {
  try {
    // libstdc++'s default (backtracking) matcher recurses once per character a loop takes: on
    // "<think>[\s\S]*</think>[\s\S]*" it overflowed the 8 MiB stack at 36 KB of text, which
    // 9,000 tokens of reasoning reach. The __polynomial one (libstdc++'s, breadth first) keeps a
    // set of states per character: 22 ms for 36 KB, 237 ms for 577 KB, no back-references.
    regex_ = std::regex(pattern, std::regex::ECMAScript | std::regex_constants::__polynomial);
  } catch (const std::regex_error& e) {
    throw UsageError(fmt::format("reward format: the pattern \"{}\" is not an ECMAScript regular expression ({})",
                                 pattern, e.what()));
  }
}

double FormatReward::operator()(std::string_view completion) const {
  return std::regex_match(completion.begin(), completion.end(), regex_) ? 1.0 : 0.0;
}

double overlong_penalty(int64_t tokens, int64_t max, int64_t cache) {
  if (tokens <= max - cache) return 0.0;
  if (tokens <= max) return static_cast<double>(max - cache - tokens) / static_cast<double>(cache);
  return -1.0;
}

}  // namespace ampt::reward

// Parsing of setting values from text (flags, env, YAML scalars), their ranges, and the one
// message format used for every rejected value.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ampt/config/source.h"
#include "ampt/core/errors.h"

namespace ampt::config {

// The interval a numeric setting must lie in, e.g. `>= 1`, `> 0` or `[0, 1)`.
struct Range {
  std::optional<double> min;
  bool min_inclusive = true;
  std::optional<double> max;
  bool max_inclusive = true;

  static Range at_least(double min) { return {min, true, std::nullopt, true}; }
  static Range above(double min) { return {min, false, std::nullopt, true}; }
  static Range interval(double min, bool min_inclusive, double max, bool max_inclusive) {
    return {min, min_inclusive, max, max_inclusive};
  }

  bool contains(double value) const;
  std::string text() const;  // ">= 1", "> 0", "in [0, 1)"; empty when unbounded
};

// The parts of a list value such as "fp32:500,bf16" (YAML lists arrive joined with ','); an
// empty text is one empty part.
std::vector<std::string_view> split(std::string_view text, char separator);
std::string_view trim(std::string_view text);  // without leading and trailing white space

// Whole decimal integers only: "12abc", "1.5", "1e3" and out-of-range values are rejected.
std::optional<int64_t> parse_int(std::string_view text);
// Finite decimal or scientific notation ("1e-3", "65536"); "inf" and "nan" are rejected.
std::optional<double> parse_float(std::string_view text);
// true/false, 1/0, yes/no, on/off in any letter case.
std::optional<bool> parse_bool(std::string_view text);

inline constexpr std::string_view kBooleanExpected = "a boolean (true/false, yes/no, on/off, 1/0)";

// "invalid value 'abc' for batch_size (flag --batch_size): expected an integer >= 1"
UsageError invalid_value(std::string_view setting, std::string_view text, const Source& source,
                         std::string_view expected);

}  // namespace ampt::config

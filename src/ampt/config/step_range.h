// A range of optimizer steps written on the command line as `N` or `A-B` (1-based, inclusive):
// which steps --profile traces.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace ampt::config {

struct StepRange {
  int64_t first = 0;
  int64_t last = 0;

  bool contains(int64_t step) const { return step >= first && step <= last; }
  bool operator==(const StepRange&) const = default;
};

inline constexpr std::string_view kStepRangeExpected =
    "an optimizer step N or a range A-B of them (1-based, A <= B), e.g. 10-12";

// nullopt for "" (no range) and for text that is not a range (the option table rejects those
// before anything reads them).
std::optional<StepRange> parse_step_range(std::string_view text);

}  // namespace ampt::config

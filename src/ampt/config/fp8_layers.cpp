#include "ampt/config/fp8_layers.h"

#include "ampt/config/precision_schedule.h"

#include <fmt/format.h>

namespace ampt::config {

std::string fp8_layers_problem(std::string_view text) {
  if (text == "auto" || text == "all") return {};
  const auto patterns = split_module_patterns(text);
  if (patterns.empty()) return fmt::format("it is empty; expected {}", kFp8LayersExpected);
  for (const auto& pattern : patterns) {
    if (pattern == "auto" || pattern == "all") {
      return fmt::format("{} stands alone, not among patterns; expected {}", pattern,
                         kFp8LayersExpected);
    }
    if (!is_module_pattern(pattern)) {
      return fmt::format("pattern '{}' is not valid; expected {}", pattern, kFp8LayersExpected);
    }
  }
  return {};
}

}  // namespace ampt::config

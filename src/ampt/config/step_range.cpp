#include "ampt/config/step_range.h"

#include <charconv>

namespace ampt::config {
namespace {

std::optional<int64_t> positive(std::string_view text) {
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < 1) return std::nullopt;
  return value;
}

}  // namespace

std::optional<StepRange> parse_step_range(std::string_view text) {
  if (text.empty()) return std::nullopt;
  const auto dash = text.find('-');
  const auto first = positive(text.substr(0, dash));
  const auto last = dash == std::string_view::npos ? first : positive(text.substr(dash + 1));
  if (!first || !last || *last < *first) return std::nullopt;
  return StepRange{*first, *last};
}

}  // namespace ampt::config

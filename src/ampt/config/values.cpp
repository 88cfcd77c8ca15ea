#include "ampt/config/values.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>

namespace ampt::config {

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  for (std::size_t start = 0;;) {
    const auto end = text.find(separator, start);
    parts.push_back(text.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) return parts;
    start = end + 1;
  }
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  return text;
}

bool Range::contains(double value) const {
  if (min && (min_inclusive ? value < *min : value <= *min)) return false;
  if (max && (max_inclusive ? value > *max : value >= *max)) return false;
  return true;
}

std::string Range::text() const {
  if (min && max) {
    return fmt::format("in {}{}, {}{}", min_inclusive ? '[' : '(', *min, *max,
                       max_inclusive ? ']' : ')');
  }
  if (min) return fmt::format("{} {}", min_inclusive ? ">=" : ">", *min);
  return {};  // no factory makes an upper bound without a lower one
}

namespace {

// from_chars must consume the whole text; a partial parse ("12abc") is a typo, not a number.
template <class T>
std::optional<T> parse_whole(std::string_view text) {
  T value{};
  const char* end = text.data() + text.size();
  auto [stop, error] = std::from_chars(text.data(), end, value);
  if (error != std::errc{} || stop != end) return std::nullopt;
  return value;
}

bool iequals(std::string_view a, std::string_view b) {
  return std::ranges::equal(a, b, [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) ==
           std::tolower(static_cast<unsigned char>(y));
  });
}

}  // namespace

std::optional<int64_t> parse_int(std::string_view text) { return parse_whole<int64_t>(text); }

std::optional<double> parse_float(std::string_view text) {
  auto value = parse_whole<double>(text);
  if (value && !std::isfinite(*value)) return std::nullopt;
  return value;
}

std::optional<bool> parse_bool(std::string_view text) {
  constexpr std::array<std::string_view, 4> truthy{"true", "1", "yes", "on"};
  constexpr std::array<std::string_view, 4> falsy{"false", "0", "no", "off"};
  auto matches = [text](std::string_view word) { return iequals(text, word); };
  if (std::ranges::any_of(truthy, matches)) return true;
  if (std::ranges::any_of(falsy, matches)) return false;
  return std::nullopt;
}

UsageError invalid_value(std::string_view setting, std::string_view text, const Source& source,
                         std::string_view expected) {
  return UsageError(fmt::format("invalid value '{}' for {} ({}): expected {}", text, setting,
                                describe(source), expected));
}

}  // namespace ampt::config

#include "ampt/config/aliases.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "ampt/config/options.h"

namespace ampt::config {

namespace {

// DeepSpeed's fp16.initial_scale_power: init_scale = 2^power. 127 keeps 2^power a finite float32,
// the dtype the scale lives in.
std::optional<std::string> power_of_two(std::string_view text) {
  auto power = parse_int(text);
  if (!power || *power < 0 || *power > 127) return std::nullopt;
  return fmt::format("{}", std::ldexp(1.0, static_cast<int>(*power)));
}

std::vector<Alias> build_aliases() {
  return {
      {"loss_scale_window", "grad_scaler_growth_interval", {"scaler"}, nullptr, ""},
      {"initial_scale_power", "grad_scaler_init", {"scaler"}, &power_of_two,
       "an integer in [0, 127] (init_scale = 2^power)"},
      {"scaler_enabled", "grad_scaler_enabled", {"amp", "scaler"}, nullptr, ""},
      {"allreduce_dtype", "reduce_dtype", {"dist"}, nullptr, ""},
      {"stage", "zero_stage", {"zero_optimization"}, nullptr, "", /*nested_only=*/true},
  };
}

}  // namespace

const std::vector<Alias>& aliases() {
  static const std::vector<Alias> table = build_aliases();
  return table;
}

const std::vector<std::string>& alias_only_sections() {
  static const std::vector<std::string> table = [] {
    std::vector<std::string> found;
    for (const Alias& alias : aliases()) {
      for (const auto& section : alias.sections) {
        if (std::ranges::find(sections(), section) == sections().end() &&
            std::ranges::find(found, section) == found.end()) {
          found.push_back(section);
        }
      }
    }
    return found;
  }();
  return table;
}

const Alias* find_alias(std::string_view key, std::string_view section) {
  for (const Alias& alias : aliases()) {
    if (alias.name != key) continue;
    if (section.empty() ? !alias.nested_only
                        : std::ranges::find(alias.sections, section) != alias.sections.end()) {
      return &alias;
    }
  }
  return nullptr;
}

Assignment alias_assignment(const Alias& alias, std::string_view text, const Source& source) {
  const Option* target = find_option(alias.target);
  if (!alias.translate) return {target, std::string(text), source};
  auto translated = alias.translate(text);
  if (!translated) throw invalid_value(alias.name, text, source, alias.expected);
  return {target, std::move(*translated), source};
}

}  // namespace ampt::config

#include "ampt/config/aliases.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "ampt/config/options.h"
#include "ampt/config/values.h"

namespace ampt::config {

namespace {

// DeepSpeed's fp16.initial_scale_power: init_scale = 2^power. 127 keeps 2^power a finite float32,
// the dtype the scale lives in.
std::optional<std::string> power_of_two(std::string_view text) {
  auto power = parse_int(text);
  if (!power || *power < 0 || *power > 127) return std::nullopt;
  return fmt::format("{}", std::ldexp(1.0, static_cast<int>(*power)));
}

// NeMo-RL's policy.precision ("bfloat16", "float16", "float32"): the compute dtype.
std::optional<std::string> precision_name(std::string_view text) {
  const auto precision = find_spelling(kPrecisionNames, text);
  if (!precision) return std::nullopt;
  return std::string(to_string(*precision));
}

std::vector<Alias> build_aliases() {
  // Onyx's mixed_precision_config: the scaler's settings under their torch names, beside the
  // autocast pair (enabled, dtype), which the YAML reader joins as the amp: section's.
  constexpr const char* kOnyx = "mixed_precision_config";
  const auto onyx = [kOnyx](const char* name, const char* target) {
    return Alias{name, target, {kOnyx}, nullptr, "", /*nested_only=*/true};
  };
  return {
      {"loss_scale_window", "grad_scaler_growth_interval", {"scaler"}, nullptr, ""},
      {"initial_scale_power", "grad_scaler_init", {"scaler"}, &power_of_two,
       "an integer in [0, 127] (init_scale = 2^power)"},
      {"scaler_enabled", "grad_scaler_enabled", {"amp", "scaler", kOnyx}, nullptr, ""},
      {"allreduce_dtype", "reduce_dtype", {"dist"}, nullptr, ""},
      {"stage", "zero_stage", {"zero_optimization"}, nullptr, "", /*nested_only=*/true},
      // SEDD's training configs.
      {"gradient_clip", "max_grad_norm", {"training"}, nullptr, ""},
      // NeMo-RL's policy: section.
      {"precision", "mixed_precision", {"policy"}, &precision_name,
       "one of " + join_spellings(kPrecisionNames), /*nested_only=*/true},
      {"max_grad_norm", "max_grad_norm", {"policy"}, nullptr, "", /*nested_only=*/true},
      onyx("init_scale", "grad_scaler_init"),
      onyx("growth_factor", "grad_scaler_growth_factor"),
      onyx("backoff_factor", "grad_scaler_backoff"),
      onyx("growth_interval", "grad_scaler_growth_interval"),
      onyx("hysteresis", "hysteresis"),
      onyx("min_loss_scale", "min_loss_scale"),
      onyx("max_loss_scale", "max_loss_scale"),
      onyx("cache_enabled", "autocast_cache"),
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

std::optional<AutocastChoice> autocast_choice(std::optional<bool> use_amp,
                                              std::optional<MixedPrecision> amp_dtype) {
  if (use_amp && !*use_amp) return AutocastChoice{MixedPrecision::no, false};
  if (amp_dtype) return AutocastChoice{*amp_dtype, true};
  if (use_amp) return AutocastChoice{MixedPrecision::fp16, false};
  return std::nullopt;
}

std::optional<Assignment> autocast_assignment(const std::optional<Written>& use_amp,
                                              const std::optional<Written>& amp_dtype) {
  std::optional<bool> enabled;
  std::optional<MixedPrecision> dtype;
  if (use_amp) {
    enabled = parse_bool(use_amp->first);
    if (!enabled) throw invalid_value("use_amp", use_amp->first, use_amp->second, kBooleanExpected);
  }
  if (amp_dtype) {
    dtype = find_spelling(kAutocastDtypes, amp_dtype->first);
    if (!dtype) {
      throw invalid_value("amp_dtype", amp_dtype->first, amp_dtype->second,
                          "one of " + join_spellings(kAutocastDtypes));
    }
  }
  const auto choice = autocast_choice(enabled, dtype);
  if (!choice) return std::nullopt;
  return Assignment{find_option("mixed_precision"), std::string(to_string(choice->precision)),
                    choice->by_dtype ? amp_dtype->second : use_amp->second};
}

Assignment alias_assignment(const Alias& alias, std::string_view text, const Source& source) {
  const Option* target = find_option(alias.target);
  if (!alias.translate) return {target, std::string(text), source};
  auto translated = alias.translate(text);
  if (!translated) throw invalid_value(alias.name, text, source, alias.expected);
  return {target, std::move(*translated), source};
}

}  // namespace ampt::config

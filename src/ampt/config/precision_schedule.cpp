#include "ampt/config/precision_schedule.h"

#include "ampt/config/enum_names.h"
#include "ampt/config/resolve.h"
#include "ampt/config/values.h"
#include "ampt/core/errors.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <stdexcept>

namespace ampt::config {
namespace {

// "fp32" is what a schedule says for full precision; "no" is accepted as mixed_precision spells it.
std::optional<MixedPrecision> stage_precision(std::string_view text) {
  if (text == "fp32" || text == "no") return MixedPrecision::no;
  if (text == "bf16") return MixedPrecision::bf16;
  if (text == "fp16") return MixedPrecision::fp16;
  return std::nullopt;
}

std::string_view unit(const PrecisionStage& stage) { return stage.until_epoch ? "epoch" : "step"; }

}  // namespace

std::vector<PrecisionStage> parse_precision_schedule(std::string_view text) {
  std::vector<PrecisionStage> stages;
  const auto items = split(text, ',');
  for (std::size_t i = 0; i < items.size(); ++i) {
    const auto item = trim(items[i]);
    const auto fail = [&](const std::string& why) {
      return std::invalid_argument(fmt::format("stage {} '{}' {}", i + 1, item, why));
    };
    if (item.empty()) throw fail("is empty");
    PrecisionStage stage;
    const auto colon = item.find(':');
    const auto name = trim(item.substr(0, colon));
    const auto precision = stage_precision(name);
    if (!precision) throw fail(fmt::format("names precision '{}', not fp32, bf16 or fp16", name));
    stage.precision = *precision;
    if (colon != std::string_view::npos) {
      auto bound = trim(item.substr(colon + 1));
      if (bound.ends_with("ep")) {
        stage.until_epoch = true;
        bound.remove_suffix(2);
      }
      const auto value = parse_int(bound);
      if (!value || *value < 1) {
        throw fail("has a bound that is not a step count N >= 1 or an epoch count Nep");
      }
      stage.until = *value;
    }
    if (!stages.empty()) {
      const auto& previous = stages.back();
      if (previous.until < 0) {
        throw fail(fmt::format("follows stage {} '{}', which has no bound: only the last stage "
                               "may be unbounded",
                               i, stage_text(previous)));
      }
      if (stage.until >= 0 && stage.until_epoch != previous.until_epoch) {
        throw fail("mixes step and epoch bounds: use one unit throughout");
      }
      if (stage.until >= 0 && stage.until <= previous.until) {
        throw fail(fmt::format("ends at {} {}, not after the previous stage's {}", unit(stage),
                               stage.until, previous.until));
      }
      if (stage.precision == previous.precision) {
        throw fail(fmt::format("repeats the previous stage's precision {}", name));
      }
    }
    stages.push_back(stage);
  }
  if (stages.back().until >= 0) {
    throw std::invalid_argument(fmt::format(
        "the last stage '{}' has a bound: the last stage runs to the end, write it without one",
        trim(items.back())));
  }
  return stages;
}

std::string schedule_problem(std::string_view text) {
  if (text.empty()) return {};  // no schedule: mixed_precision throughout
  try {
    parse_precision_schedule(text);
    return {};
  } catch (const std::invalid_argument& error) {
    return fmt::format("{}; expected {}", error.what(), kScheduleExpected);
  }
}

std::string stage_text(const PrecisionStage& stage) {
  const std::string name = stage.precision == MixedPrecision::no
                               ? "fp32"
                               : std::string(to_string(stage.precision));
  if (stage.until < 0) return name;
  return fmt::format("{}:{}{}", name, stage.until, stage.until_epoch ? "ep" : "");
}

std::vector<PrecisionStage> precision_stages(const Config& config) {
  if (config.precision_schedule.empty()) return {{config.mixed_precision, -1, false}};
  return parse_precision_schedule(config.precision_schedule);
}

std::size_t stage_at(const std::vector<PrecisionStage>& stages, int64_t step, int64_t epoch) {
  for (std::size_t i = 0; i < stages.size(); ++i) {
    const auto& stage = stages[i];
    if (stage.until < 0 || (stage.until_epoch ? epoch : step) < stage.until) return i;
  }
  return stages.size() - 1;
}

std::vector<std::string> split_module_patterns(std::string_view text) {
  std::vector<std::string> patterns;
  if (trim(text).empty()) return patterns;
  for (const auto part : split(text, ',')) patterns.emplace_back(trim(part));
  return patterns;
}

bool is_module_pattern(std::string_view pattern) {
  return !pattern.empty() && std::ranges::all_of(pattern, [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '*' ||
           c == '?';
  });
}

std::string module_patterns_problem(std::string_view text) {
  for (const auto& pattern : split_module_patterns(text)) {
    if (!is_module_pattern(pattern)) {
      return fmt::format("pattern '{}' is not valid; expected {}", pattern,
                         kModulePatternsExpected);
    }
  }
  return {};
}

void check_precision_settings(const Resolved& resolved) {
  const Config& config = resolved.config();
  const auto precision_source = resolved.source_of("mixed_precision");
  const bool precision_set = precision_source.kind != Source::Kind::default_value;
  if (config.precision_schedule.empty()) {
    if (config.amp_opt_level == OptLevel::O2 && config.mixed_precision == MixedPrecision::no) {
      throw UsageError(fmt::format(
          "amp_opt_level O2 ({}) keeps weights in a half dtype, but mixed_precision is no ({}): "
          "use bf16, fp16 or auto with O2, or O0/O1 for fp32",
          describe(resolved.source_of("amp_opt_level")), describe(precision_source)));
    }
    return;
  }
  const auto stages = parse_precision_schedule(config.precision_schedule);
  const auto last = stages.back().precision;
  if (precision_set && config.mixed_precision != last) {
    throw UsageError(fmt::format(
        "mixed_precision {} ({}) contradicts precision_schedule '{}' ({}), which ends in {}: "
        "leave mixed_precision unset or set it to the schedule's last precision",
        to_string(config.mixed_precision), describe(precision_source), config.precision_schedule,
        describe(resolved.source_of("precision_schedule")), stage_text({last, -1, false})));
  }
}

}  // namespace ampt::config

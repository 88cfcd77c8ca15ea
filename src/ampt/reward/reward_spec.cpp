#include "ampt/reward/reward_spec.h"

#include "ampt/core/errors.h"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <optional>

namespace ampt::reward {
namespace {

std::string_view spec_trimmed(std::string_view s) {
  const std::size_t begin = s.find_first_not_of(" \t");
  if (begin == std::string_view::npos) return {};
  return s.substr(begin, s.find_last_not_of(" \t") - begin + 1);
}

std::optional<RewardKind> kind_named(std::string_view name) {
  if (name == "math") return RewardKind::math;
  if (name == "exact") return RewardKind::exact;
  if (name == "format") return RewardKind::format;
  if (name == "overlong") return RewardKind::overlong;
  if (name == "program") return RewardKind::program;
  return std::nullopt;
}

double weight_of(std::string_view entry, std::string_view text, const std::string& spec) {
  const std::string copy(text);
  char* end = nullptr;
  errno = 0;
  const double weight = copy.empty() ? 0 : std::strtod(copy.c_str(), &end);
  if (copy.empty() || end != copy.c_str() + copy.size() || errno == ERANGE || !std::isfinite(weight)) {
    throw UsageError(fmt::format("--reward {}: the weight of {} is \"{}\"; it must be a finite number, as in "
                                 "math:0.5",
                                 spec, entry, text));
  }
  return weight;
}

}  // namespace

std::string_view reward_names() { return "math, exact, format, overlong and program"; }

std::vector<RewardTerm> parse_reward_spec(const RewardSettings& settings) {
  const std::string& spec = settings.spec;
  std::vector<RewardTerm> terms;
  for (std::size_t pos = 0; !spec_trimmed(spec).empty() && pos <= spec.size();) {
    std::size_t comma = spec.find(',', pos);
    if (comma == std::string::npos) comma = spec.size();
    const std::string_view entry = spec_trimmed(std::string_view(spec).substr(pos, comma - pos));
    pos = comma + 1;
    const std::size_t colon = entry.find(':');
    const std::string_view name = spec_trimmed(entry.substr(0, colon));
    if (name.empty()) {
      throw UsageError(fmt::format("--reward {}: an entry without a name; expected NAME[:WEIGHT],... with NAME "
                                   "one of {}",
                                   spec, reward_names()));
    }
    const auto kind = kind_named(name);
    if (!kind) {
      throw UsageError(fmt::format("--reward {}: unknown reward \"{}\"; the rewards are {}", spec, name,
                                   reward_names()));
    }
    for (const auto& term : terms) {
      if (term.name == name) throw UsageError(fmt::format("--reward {}: {} is named twice", spec, name));
    }
    const double weight =
        colon == std::string_view::npos ? 1.0 : weight_of(name, spec_trimmed(entry.substr(colon + 1)), spec);
    if (*kind == RewardKind::program && settings.command.empty()) {
      throw UsageError(fmt::format("--reward {}: program scores with the reward program, and no "
                                   "--reward_command is given",
                                   spec));
    }
    terms.push_back(RewardTerm{*kind, std::string(name), weight});
  }
  if (!settings.command.empty()) {
    bool named = false;
    for (const auto& term : terms) named = named || term.kind == RewardKind::program;
    if (!named) terms.push_back(RewardTerm{RewardKind::program, "program", 1.0});
    if (!(settings.timeout_seconds > 0) || !std::isfinite(settings.timeout_seconds)) {
      throw UsageError(fmt::format("--reward_timeout {}: the reward program's time-out must be a positive "
                                   "number of seconds",
                                   settings.timeout_seconds));
    }
  }
  if (terms.empty()) {
    throw UsageError(fmt::format("no reward: --reward names none and --reward_command is not given; the rewards "
                                 "are {}",
                                 reward_names()));
  }
  for (const auto& term : terms) {
    if (term.kind != RewardKind::overlong) continue;
    if (settings.overlong_max < 1) {
      throw UsageError(fmt::format("reward overlong: its maximum length is {} tokens; it must be at least 1",
                                   settings.overlong_max));
    }
    if (settings.overlong_cache < 1 || settings.overlong_cache > settings.overlong_max) {
      throw UsageError(fmt::format("reward overlong: its cache is {} tokens; it must be from 1 to the maximum "
                                   "length, {} tokens",
                                   settings.overlong_cache, settings.overlong_max));
    }
  }
  return terms;
}

}  // namespace ampt::reward

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "ampt/config/aliases.h"
#include "ampt/config/options.h"
#include "ampt/config/readers.h"
#include "ampt/config/suggest.h"

namespace ampt::config {

namespace {

// AMPT_ALLREDUCE_DTYPE for the alias allreduce_dtype, as an option's variable is named.
std::string env_name(std::string_view alias) {
  std::string name = "AMPT_" + std::string(alias);
  std::ranges::transform(name, name.begin(), [](unsigned char c) { return std::toupper(c); });
  return name;
}

}  // namespace

std::vector<Assignment> read_env(const std::map<std::string, std::string>& env) {
  std::vector<std::string> known;
  for (const Option& option : options()) known.push_back(option.env);
  for (const Alias& alias : aliases()) {
    if (!alias.nested_only) known.push_back(env_name(alias.name));
  }
  for (const char* name : kAutocastNames) known.push_back(env_name(name));

  std::vector<Assignment> assignments;
  // torch.autocast's pair, which AMPT_MIXED_PRECISION must not also give.
  const auto autocast = [&env](const char* alias) -> std::optional<Written> {
    const auto found = env.find(env_name(alias));
    if (found == env.end()) return std::nullopt;
    return Written{found->second, {Source::Kind::env, found->first}};
  };
  if (auto pair = autocast_assignment(autocast(kAutocastNames[0]), autocast(kAutocastNames[1]))) {
    if (env.contains(pair->option->env)) {
      throw UsageError(fmt::format("{} and {} both set {}; give one of them", pair->source.where,
                                   pair->option->env, pair->option->name));
    }
    assignments.push_back(std::move(*pair));
  }
  for (const auto& [name, text] : env) {
    if (!name.starts_with("AMPT_")) continue;
    if (std::ranges::any_of(kAutocastNames, [&name](const char* a) { return env_name(a) == name; }))
      continue;
    auto found = std::ranges::find(options(), name, &Option::env);
    const auto alias = std::ranges::find_if(
        aliases(), [&name](const Alias& a) { return !a.nested_only && env_name(a.name) == name; });
    if (found == options().end() && alias != aliases().end()) {
      auto assignment = alias_assignment(*alias, text, {Source::Kind::env, name});
      // Two spellings of one setting: which should win is anyone's guess.
      if (env.contains(assignment.option->env)) {
        throw UsageError(fmt::format("{} and {} both set {}; give one of them", name,
                                     assignment.option->env, alias->target));
      }
      assignments.push_back(std::move(assignment));
      continue;
    }
    if (found == options().end()) {
      // A misspelt variable would otherwise be silently ignored and the run would use a default.
      auto suggestion = closest(name, known);
      throw UsageError(
          fmt::format("unknown environment variable {}{}", name,
                      suggestion ? fmt::format(" (did you mean {}?)", *suggestion) : ""));
    }
    assignments.push_back({&*found, text, {Source::Kind::env, name}});
  }
  return assignments;
}

}  // namespace ampt::config

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
std::string env_name(const Alias& alias) {
  std::string name = "AMPT_" + alias.name;
  std::ranges::transform(name, name.begin(), [](unsigned char c) { return std::toupper(c); });
  return name;
}

}  // namespace

std::vector<Assignment> read_env(const std::map<std::string, std::string>& env) {
  std::vector<std::string> known;
  for (const Option& option : options()) known.push_back(option.env);
  for (const Alias& alias : aliases()) {
    if (!alias.nested_only) known.push_back(env_name(alias));
  }

  std::vector<Assignment> assignments;
  for (const auto& [name, text] : env) {
    if (!name.starts_with("AMPT_")) continue;
    auto found = std::ranges::find(options(), name, &Option::env);
    const auto alias = std::ranges::find_if(
        aliases(), [&name](const Alias& a) { return !a.nested_only && env_name(a) == name; });
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

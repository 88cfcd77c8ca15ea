#include <fmt/format.h>

#include <algorithm>

#include "ampt/config/options.h"
#include "ampt/config/readers.h"
#include "ampt/config/suggest.h"

namespace ampt::config {

std::vector<Assignment> read_env(const std::map<std::string, std::string>& env) {
  std::vector<std::string> known;
  for (const Option& option : options()) known.push_back(option.env);

  std::vector<Assignment> assignments;
  for (const auto& [name, text] : env) {
    if (!name.starts_with("AMPT_")) continue;
    auto found = std::ranges::find(options(), name, &Option::env);
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

#include "ampt/config/option.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace ampt::config {

UsageError OptionInfo::rejected(std::string_view text, const Source& source) const {
  const std::string why = problem ? problem(text) : std::string();
  if (why.empty()) return invalid_value(name, text, source, expected);
  return UsageError(fmt::format("invalid value '{}' for {} ({}): {}", text, name, describe(source), why));
}

std::string OptionInfo::yaml_path() const { return section.empty() ? "" : section + "." + key; }

OptionInfo named_option(std::string name, std::string_view yaml_path, std::string help) {
  OptionInfo option;
  option.env = "AMPT_" + name;
  std::ranges::transform(option.env, option.env.begin(),
                         [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  if (auto dot = yaml_path.find('.'); dot != std::string_view::npos) {
    option.section = yaml_path.substr(0, dot);
    option.key = yaml_path.substr(dot + 1);
  }
  option.name = std::move(name);
  option.help = std::move(help);
  return option;
}

void constrain(OptionInfo& option, std::string_view kind, std::string constraint) {
  option.expected = constraint.empty() ? std::string(kind) : fmt::format("{} {}", kind, constraint);
  option.constraint = std::move(constraint);
}

}  // namespace ampt::config

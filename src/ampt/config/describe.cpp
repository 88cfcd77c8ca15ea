#include "ampt/config/describe.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "ampt/config/aliases.h"
#include "ampt/config/options.h"
#include "ampt/config/values.h"

namespace ampt::config {

namespace {

constexpr std::size_t kLineWidth = 100;
// The flag column is as wide as the longest flag up to this; a longer one (a choice with many
// values) gets a line of its own, so it does not push every help text to the right.
constexpr std::size_t kMaxFlagWidth = 32;

// Calls `line(option)` for each option in table order, after a header whenever the section
// changes; options outside any section (config) come first and get no header.
template <class Header, class Line>
void by_section(Header header, Line line) {
  std::string_view current;
  for (const Option& option : options()) {
    if (option.section != current) {
      current = option.section;
      header(current);
    }
    line(option);
  }
}

std::string flag_spelling(const Option& option, const Catalog& catalog) {
  const auto hint = option.catalog_choices != nullptr
                        ? fmt::format("{}", fmt::join(catalog.*option.catalog_choices, "|"))
                        : option.value_hint;
  return option.is_switch ? fmt::format("--{}[={}]", option.name, hint)
                          : fmt::format("--{} {}", option.name, hint);
}

// "[>= 1, default: 64, YAML scaler.init_scale]": the facts --help adds to an option's help.
std::string facts(const Option& option, const Config& defaults) {
  std::vector<std::string> parts;
  if (!option.constraint.empty()) parts.push_back(option.constraint);
  if (std::string value = option.format(defaults); !value.empty())
    parts.push_back("default: " + value);
  if (!option.section.empty() && option.key != option.name)
    parts.push_back("YAML " + option.yaml_path());
  for (const Alias& alias : aliases()) {
    if (alias.target != option.name) continue;
    parts.push_back(alias.nested_only ? "YAML " + alias.sections.front() + "." + alias.name
                                      : "alias --" + alias.name);
  }
  if (option.name == "mixed_precision") {
    parts.push_back(fmt::format("torch.autocast's --{} and --{}", kAutocastNames[0],
                                kAutocastNames[1]));
  }
  return parts.empty() ? "" : fmt::format(" [{}]", fmt::join(parts, ", "));
}

}  // namespace

std::string help_text(std::string_view program_and_subcommand, const Catalog& catalog) {
  const Config defaults;
  std::size_t width = std::string_view("-h, --help").size();
  for (const Option& option : options()) {
    if (const std::size_t size = flag_spelling(option, catalog).size(); size <= kMaxFlagWidth) {
      width = std::max(width, size);
    }
  }

  std::string text = fmt::format(
      "Usage: {} [--OPTION VALUE]...\n\n"
      "Every option can also be set as environment variable AMPT_<NAME> (AMPT_BATCH_SIZE=32)\n"
      "or in the YAML file given by --config (training: {{batch_size: 32}}, or batch_size: 32).\n"
      "Precedence: flag > environment > YAML file > default.\n\n"
      "  {:<{}}  Show this help and exit\n",
      program_and_subcommand, "-h, --help", width);
  by_section([&](std::string_view section) { text += fmt::format("\n{}:\n", section); },
             [&](const Option& option) {
               std::string flag = flag_spelling(option, catalog);
               if (flag.size() > width) {
                 text += "  " + flag + "\n";
                 flag.clear();
               }
               std::string line = fmt::format("  {:<{}}  {}", flag, width, option.help);
               // Long lines keep the facts on a continuation line aligned with the help column.
               std::string extra = facts(option, defaults);
               if (!extra.empty() && line.size() + extra.size() > kLineWidth)
                 extra = fmt::format("\n{:<{}}{}", "", width + 4, extra.substr(1));
               text += line + extra + "\n";
             });
  return text;
}

std::string describe(const Resolved& resolved) {
  std::size_t name_width = 0;
  std::size_t value_width = 0;
  for (const Option& option : options()) {
    name_width = std::max(name_width, option.name.size());
    value_width = std::max(value_width, option.format(resolved.config()).size());
  }

  std::string text;
  by_section([&](std::string_view section) { text += fmt::format("[{}]\n", section); },
             [&](const Option& option) {
               text += fmt::format("{:<{}} = {:<{}}  ({})\n", option.name, name_width,
                                   option.format(resolved.config()), value_width,
                                   describe(resolved.source_of(option.name)));
             });
  return text;
}

std::vector<std::string> described_flags(std::string_view description) {
  std::vector<std::string> flags;
  for (const auto raw : split(description, '\n')) {
    const auto line = std::string(raw);
    const auto equals = line.find(" = ");
    const auto source = line.rfind("  (");
    if (equals == std::string::npos || source == std::string::npos || source < equals) continue;
    const auto name = std::string(trim(std::string_view(line).substr(0, equals)));
    if (name == "config" || line.compare(source, 11, "  (default)") == 0) continue;
    const auto value = trim(std::string_view(line).substr(equals + 3, source - equals - 3));
    flags.push_back(fmt::format("--{}={}", name, value));
  }
  return flags;
}

}  // namespace ampt::config

#include "ampt/config/describe.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "ampt/config/aliases.h"
#include "ampt/config/command_flags.h"
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

std::string flag_spelling(const OptionInfo& option, const Catalog* catalog) {
  const auto hint = option.catalog_choices != nullptr && catalog != nullptr
                        ? fmt::format("{}", fmt::join(catalog->*option.catalog_choices, "|"))
                        : option.value_hint;
  if (option.positional != OptionInfo::Positional::no) return hint;
  return option.is_switch ? fmt::format("--{}[={}]", option.name, hint)
                          : fmt::format("--{} {}", option.name, hint);
}

// "[>= 1, default: 64, YAML scaler.init_scale]": the facts --help adds to an option's help.
std::string facts(const OptionInfo& option, const std::string& default_text) {
  std::vector<std::string> parts;
  if (!option.constraint.empty()) parts.push_back(option.constraint);
  if (option.required) parts.push_back("required");
  if (!default_text.empty()) parts.push_back("default: " + default_text);
  if (default_text.empty() && !option.default_note.empty()) {
    parts.push_back("default: " + option.default_note);
  }
  if (!option.section.empty() && option.key != option.name)
    parts.push_back("YAML " + option.yaml_path());
  for (const Alias& alias : aliases()) {
    if (alias.target != option.name || option.env.empty()) continue;
    parts.push_back(alias.nested_only ? "YAML " + alias.sections.front() + "." + alias.name
                                      : "alias --" + alias.name);
  }
  if (option.name == "mixed_precision" && !option.env.empty()) {
    parts.push_back(fmt::format("torch.autocast's --{} and --{}", kAutocastNames[0],
                                kAutocastNames[1]));
  }
  return parts.empty() ? "" : fmt::format(" [{}]", fmt::join(parts, ", "));
}

// The flag column's width: as wide as the longest flag up to kMaxFlagWidth.
std::size_t flag_width(const std::vector<FlagReference>& flags, const Catalog* catalog) {
  std::size_t width = std::string_view("-h, --help").size();
  for (const auto& flag : flags) {
    if (const std::size_t size = flag_spelling(*flag.option, catalog).size(); size <= kMaxFlagWidth) {
      width = std::max(width, size);
    }
  }
  return width;
}

// One option's help: the flag, its help, and its facts (on a line of their own when long).
std::string flag_line(const FlagReference& flag, std::size_t width, const Catalog* catalog) {
  std::string text;
  std::string spelling = flag_spelling(*flag.option, catalog);
  if (spelling.size() > width) {
    text += "  " + spelling + "\n";
    spelling.clear();
  }
  std::string line = fmt::format("  {:<{}}  {}", spelling, width, flag.option->help);
  // Long lines keep the facts on a continuation line aligned with the help column.
  std::string extra = facts(*flag.option, flag.default_text);
  if (!extra.empty() && line.size() + extra.size() > kLineWidth)
    extra = fmt::format("\n{:<{}}{}", "", width + 4, extra.substr(1));
  return text + line + extra + "\n";
}

}  // namespace

std::string help_text(std::string_view program_and_subcommand, const Catalog& catalog) {
  const auto references = training_references();
  const std::size_t width = flag_width(references, &catalog);
  std::string text = fmt::format(
      "Usage: {} [--OPTION VALUE]...\n\n"
      "Every option can also be set as environment variable AMPT_<NAME> (AMPT_BATCH_SIZE=32)\n"
      "or in the YAML file given by --config (training: {{batch_size: 32}}, or batch_size: 32).\n"
      "Precedence: flag > environment > YAML file > default.\n\n"
      "  {:<{}}  Show this help and exit\n",
      program_and_subcommand, "-h, --help", width);
  std::string_view section;
  for (const auto& reference : references) {
    if (reference.option->section != section) {
      section = reference.option->section;
      text += fmt::format("\n{}:\n", section);
    }
    text += flag_line(reference, width, &catalog);
  }
  return text;
}

std::string command_help(std::string_view command, std::string_view usage,
                         const std::vector<FlagReference>& flags, const Catalog* training_catalog) {
  const std::size_t width = flag_width(flags, nullptr);
  std::string text = fmt::format("{}\n\nFlags of ampt {}:\n  {:<{}}  Show this help and exit\n",
                                 usage, command, "-h, --help", width);
  for (const auto& flag : flags) text += flag_line(flag, width, nullptr);
  if (training_catalog == nullptr) return text;
  text += fmt::format("\nEvery training option below applies as it does to ampt train.\n\n");
  return text + help_text(fmt::format("ampt {}", command), *training_catalog);
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

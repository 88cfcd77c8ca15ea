#include "ampt/config/subcommand_flags.h"

#include "ampt/config/describe.h"
#include "ampt/core/errors.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace ampt::config {

SplitArgs split_subcommand_flags(const std::vector<std::string>& args,
                                 const std::vector<SubcommandFlag>& flags) {
  SplitArgs split;
  std::set<std::string> given;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {  // positional from here on: resolve() reports them
      split.rest.insert(split.rest.end(), args.begin() + static_cast<std::ptrdiff_t>(i),
                        args.end());
      break;
    }
    const auto eq = arg.find('=');
    const std::string spelled = arg.substr(0, eq);
    const auto flag = std::ranges::find_if(
        flags, [&](const SubcommandFlag& f) { return spelled == "--" + f.name; });
    if (flag == flags.end()) {
      split.rest.push_back(arg);
      continue;
    }
    if (!given.insert(flag->name).second) {
      throw UsageError(fmt::format("flag --{} is given twice", flag->name));
    }
    if (eq != std::string::npos) {
      split.values[flag->name] = arg.substr(eq + 1);
    } else if (i + 1 < args.size() && !args[i + 1].starts_with("--")) {
      split.values[flag->name] = args[++i];
    } else {
      throw UsageError(fmt::format("flag --{} needs a value ({})", flag->name, flag->metavar));
    }
  }
  for (const auto& flag : flags) split.values.emplace(flag.name, flag.default_value);
  return split;
}

std::string subcommand_help(const std::string& program_and_subcommand, const std::string& summary,
                            const std::vector<SubcommandFlag>& flags, const Catalog& catalog) {
  std::string text = fmt::format("{}\n\nFlags of {}:\n", summary, program_and_subcommand);
  std::size_t width = 0;
  for (const auto& f : flags) width = std::max(width, f.name.size() + f.metavar.size() + 3);
  for (const auto& f : flags) {
    text += fmt::format("  {:<{}}  {}{}\n", fmt::format("--{} {}", f.name, f.metavar), width,
                        f.help,
                        f.default_value.empty() ? "" : " [default: " + f.default_value + "]");
  }
  text += fmt::format("\nEvery training option below applies as it does to ampt train.\n\n");
  return text + help_text(program_and_subcommand, catalog);
}

namespace {

UsageError invalid_flag(const std::string& name, const std::string& text, const std::string& kind,
                        const Range& range) {
  return UsageError(
      fmt::format("invalid value '{}' for --{}: expected {} {}", text, name, kind, range.text()));
}

}  // namespace

double subcommand_number(const std::string& name, const std::string& text, const Range& range) {
  const auto value = parse_float(text);
  if (!value || !range.contains(*value)) throw invalid_flag(name, text, "a number", range);
  return *value;
}

int64_t subcommand_integer(const std::string& name, const std::string& text, const Range& range) {
  const auto value = parse_int(text);
  if (!value || !range.contains(static_cast<double>(*value))) {
    throw invalid_flag(name, text, "an integer", range);
  }
  return *value;
}

}  // namespace ampt::config

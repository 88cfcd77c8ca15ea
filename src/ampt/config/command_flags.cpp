#include "ampt/config/command_flags.h"

#include "ampt/config/options.h"
#include "ampt/config/readers.h"

#include <cxxopts.hpp>
#include <fmt/format.h>

#include <algorithm>

namespace ampt::config {

namespace {

using Positional = OptionInfo::Positional;

// The command's flags as string-valued long options, as flag_source.cpp sets up the training
// ones: the values are the option table's to parse.
cxxopts::Options command_cli(const std::string& program, const std::vector<const OptionInfo*>& flags) {
  cxxopts::Options cli(program);
  const OptionInfo* positional = nullptr;
  for (const OptionInfo* option : flags) {
    if (option->positional != Positional::no) {
      cli.add_options()(option->name, option->help, cxxopts::value<std::vector<std::string>>());
      positional = option;
      continue;
    }
    auto value = cxxopts::value<std::string>();
    if (option->is_switch) value->implicit_value("true");
    cli.add_options()(option->name, option->help, value);
  }
  if (positional != nullptr) cli.parse_positional({positional->name});
  cli.add_options()("h,help", "Show this help and exit");
  cli.allow_unrecognised_options();
  return cli;
}

}  // namespace

CommandArgs split_command_args(std::string_view command, const std::vector<const OptionInfo*>& flags,
                               const std::vector<std::string>& all_args, bool training_options) {
  const std::string program = fmt::format("ampt {}", command);
  const auto separator = std::ranges::find(all_args, "--");
  const std::vector<std::string> args(all_args.begin(), separator);
  const std::vector<std::string> after(separator == all_args.end() ? separator : separator + 1,
                                       all_args.end());
  auto cli = command_cli(program, flags);
  const auto parsed = parse_arguments(cli, args);

  const auto is_switch = [&flags](std::string_view name) {
    return std::ranges::any_of(flags, [name](const OptionInfo* o) { return o->is_switch && o->name == name; });
  };
  // The arguments that are not the command's come first: a misspelt flag is named as such,
  // not as the required flag it failed to give.
  std::vector<std::string> known;
  for (const OptionInfo* option : flags) {
    if (option->positional == Positional::no) known.push_back("--" + option->name);
  }
  CommandArgs split;
  if (training_options) {
    const auto training = training_flag_spellings();
    known.insert(known.end(), training.begin(), training.end());
    for (const std::string& arg : parsed.unmatched()) {
      const auto spelled = arg.substr(0, arg.find('='));
      if (arg.starts_with("--") && std::ranges::find(training, spelled) == training.end()) {
        throw unknown_flag(arg, known);
      }
    }
    split.rest = parsed.unmatched();
    if (separator != all_args.end()) split.rest.insert(split.rest.end(), separator, all_args.end());
  } else {
    known.emplace_back("--help");
    for (const std::string& arg : parsed.unmatched()) {
      if (arg.starts_with("-") && arg != "-") throw unknown_flag(arg, known);
      throw unexpected_argument(arg, args, is_switch);
    }
    const bool takes_positionals = std::ranges::any_of(
        flags, [](const OptionInfo* o) { return o->positional != Positional::no; });
    if (!after.empty() && !takes_positionals) throw unexpected_argument(after.front(), args, is_switch);
  }

  for (std::size_t index = 0; index < flags.size(); ++index) {
    const OptionInfo& option = *flags[index];
    if (option.positional != Positional::no) {
      auto values = parsed.count(option.name) != 0
                        ? parsed[option.name].as<std::vector<std::string>>()
                        : std::vector<std::string>{};
      values.insert(values.end(), after.begin(), after.end());
      if (option.positional == Positional::one && values.size() > 1) {
        throw unexpected_argument(values[1], args, is_switch);
      }
      if (option.required && values.empty()) {
        throw UsageError(fmt::format("{} needs {}; see {} --help", program, option.value_hint, program));
      }
      for (auto& value : values) split.own.emplace_back(index, std::move(value));
      continue;
    }
    // A repeated flag's last value wins, as for the training options.
    if (parsed.count(option.name) == 0) {
      if (option.required) {
        throw UsageError(fmt::format("{} needs --{}; see {} --help", program, option.name, program));
      }
      continue;
    }
    auto text = parsed[option.name].as<std::string>();
    // `--out --format hf`: cxxopts takes "--format" as the value; no flag's value starts so.
    if (!option.is_switch && text.starts_with("--")) {
      throw UsageError(fmt::format("{}: flag --{} needs a value", program, option.name));
    }
    split.own.emplace_back(index, std::move(text));
  }
  return split;
}

TakenFlags take_flags(const std::vector<std::string>& args, const std::vector<std::string>& names) {
  TakenFlags taken;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {  // positional from here on: resolve() reports them
      taken.rest.insert(taken.rest.end(), args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
      break;
    }
    const auto eq = arg.find('=');
    const auto name = std::find_if(names.begin(), names.end(), [&](const std::string& n) {
      return arg.compare(0, eq, "--" + n) == 0 && (eq == std::string::npos ? arg.size() : eq) == n.size() + 2;
    });
    if (name == names.end()) {
      taken.rest.push_back(arg);
      continue;
    }
    const Option* option = find_option(*name);
    if (eq != std::string::npos) {
      taken.values[*name] = arg.substr(eq + 1);
    } else if (option != nullptr && option->is_switch) {
      taken.values[*name] = "true";
    } else if (i + 1 < args.size()) {
      taken.values[*name] = args[++i];
    } else {
      throw UsageError(fmt::format("flag --{} needs a value", *name));
    }
  }
  return taken;
}

}  // namespace ampt::config

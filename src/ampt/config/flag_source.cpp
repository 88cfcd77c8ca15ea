#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <cxxopts.hpp>

#include "ampt/config/aliases.h"
#include "ampt/config/options.h"
#include "ampt/config/readers.h"
#include "ampt/config/resolve.h"
#include "ampt/config/suggest.h"

namespace ampt::config {

namespace {

// Every option as a string-valued long flag; values are parsed by the option table, not cxxopts,
// so flags, env and YAML share one parser and one error format.
cxxopts::Options make_cli() {
  cxxopts::Options cli("ampt");
  for (const Option& option : options()) {
    auto value = cxxopts::value<std::string>();
    if (option.is_switch) value->implicit_value("true");
    cli.add_options()(option.name, option.help, value);
  }
  for (const Alias& alias : aliases()) {
    if (alias.nested_only) continue;
    auto value = cxxopts::value<std::string>();
    if (find_option(alias.target)->is_switch) value->implicit_value("true");
    cli.add_options()(alias.name, "alias of --" + alias.target, value);
  }
  cli.add_options()(kAutocastNames[0], "torch.autocast's enabled (aliases.h)",
                    cxxopts::value<std::string>()->implicit_value("true"));
  cli.add_options()(kAutocastNames[1], "torch.autocast's dtype (aliases.h)",
                    cxxopts::value<std::string>());
  cli.add_options()("h,help", "Show this help and exit");
  cli.allow_unrecognised_options();
  return cli;
}

}  // namespace

cxxopts::ParseResult parse_arguments(cxxopts::Options& cli, const std::vector<std::string>& args) {
  std::vector<const char*> argv{"ampt"};
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  try {
    return cli.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const cxxopts::exceptions::missing_argument&) {
    // cxxopts only reports this for a value-taking flag that is the last argument.
    throw UsageError(fmt::format("flag {} needs a value", args.back()));
  } catch (const cxxopts::exceptions::exception& error) {
    throw UsageError(fmt::format("cannot parse the command line: {}", error.what()));
  }
}

std::vector<std::string> training_flag_spellings() {
  std::vector<std::string> known{"--help"};
  for (const Option& option : options()) known.push_back("--" + option.name);
  for (const Alias& alias : aliases()) {
    if (!alias.nested_only) known.push_back("--" + alias.name);
  }
  for (const char* name : kAutocastNames) known.push_back(std::string("--") + name);
  return known;
}

UsageError unknown_flag(const std::string& arg, const std::vector<std::string>& known) {
  std::string flag = arg.substr(0, arg.find('='));
  auto suggestion = closest(flag, known);
  return UsageError(
      fmt::format("unknown flag '{}'{}", flag,
                  suggestion ? fmt::format(" (did you mean '{}'?)", *suggestion) : ""));
}

UsageError unexpected_argument(const std::string& arg, const std::vector<std::string>& args,
                               const std::function<bool(std::string_view)>& is_switch) {
  auto at = std::ranges::find(args, arg);
  if (at != args.begin() && at != args.end() && (at - 1)->starts_with("--")) {
    const auto previous = std::string_view(*(at - 1)).substr(2);
    if (is_switch(previous)) {
      return UsageError(
          fmt::format("unexpected argument '{}' (write --{}={} to give a boolean flag a value)",
                      arg, previous, arg));
    }
  }
  return UsageError(fmt::format("unexpected argument '{}'", arg));
}

namespace {

bool is_training_switch(std::string_view name) {
  const Option* option = find_option(name);
  return option != nullptr && option->is_switch;
}

}  // namespace

bool wants_help(const std::vector<std::string>& args) {
  for (const std::string& arg : args) {
    if (arg == "--") return false;
    if (arg == "-h" || arg == "--help") return true;
  }
  return false;
}

std::vector<Assignment> read_flags(const std::vector<std::string>& all_args) {
  // Everything after "--" is positional, and ampt takes no positional arguments.
  auto separator = std::ranges::find(all_args, "--");
  const std::vector<std::string> args(all_args.begin(), separator);
  auto cli = make_cli();
  cxxopts::ParseResult parsed = parse_arguments(cli, args);

  std::vector<Assignment> assignments;
  for (const Option& option : options()) {
    if (parsed.count(option.name) == 0) continue;
    auto text = parsed[option.name].as<std::string>();
    // `--batch_size --lr 0.1`: cxxopts takes "--lr" as the value; no option's value starts so.
    if (!option.is_switch && text.starts_with("--")) {
      throw UsageError(fmt::format("flag --{} needs a value", option.name));
    }
    assignments.push_back({&option, std::move(text), {Source::Kind::flag, "--" + option.name}});
  }
  // Two spellings of one setting on one command line: which should win is anyone's guess.
  const auto add_alias = [&assignments](Assignment assignment) {
    auto same = std::ranges::find(assignments, assignment.option, &Assignment::option);
    if (same != assignments.end()) {
      throw UsageError(fmt::format("{} and {} both set {}; give one of them",
                                   describe(same->source), assignment.source.where,
                                   assignment.option->name));
    }
    assignments.push_back(std::move(assignment));
  };
  for (const Alias& alias : aliases()) {
    if (alias.nested_only || parsed.count(alias.name) == 0) continue;
    const Source source{Source::Kind::flag, "--" + alias.name};
    add_alias(alias_assignment(alias, parsed[alias.name].as<std::string>(), source));
  }
  const auto autocast = [&parsed](const char* name) -> std::optional<Written> {
    if (parsed.count(name) == 0) return std::nullopt;
    return Written{parsed[name].as<std::string>(), {Source::Kind::flag, std::string("--") + name}};
  };
  if (auto pair = autocast_assignment(autocast(kAutocastNames[0]), autocast(kAutocastNames[1]))) {
    add_alias(std::move(*pair));
  }

  for (const std::string& arg : parsed.unmatched()) {
    if (arg.starts_with("-") && arg != "-") throw unknown_flag(arg, training_flag_spellings());
    throw unexpected_argument(arg, args, is_training_switch);
  }
  if (separator != all_args.end() && separator + 1 != all_args.end()) {
    throw unexpected_argument(*(separator + 1), args, is_training_switch);
  }
  return assignments;
}

}  // namespace ampt::config

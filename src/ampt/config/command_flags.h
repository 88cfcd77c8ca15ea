// A command's own flags (ampt export --out, ampt compare --steps, ampt plot RUN_DIR): an option
// table over the command's settings struct, built with option.h's factories and parsed by the
// same cxxopts set-up and rules as the training options, so every flag of every command has one
// help format, one error style and one reference (docs/options.md).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ampt/config/catalog.h"
#include "ampt/config/option.h"

namespace ampt::config {

template <class T>
using FlagTable = std::vector<BasicOption<T>>;

template <class T>
std::vector<FlagReference> flag_references(const FlagTable<T>& table) {
  const T defaults{};
  std::vector<FlagReference> references;
  for (const auto& option : table) references.push_back({&option, option.format(defaults)});
  return references;
}

// What `args` held for a command: its own flags (their index in the command's table, with the
// text given) and, in order, every other argument, for the training options' resolve().
struct CommandArgs {
  std::vector<std::pair<std::size_t, std::string>> own;
  std::vector<std::string> rest;
};

// Takes the command's `flags` out of `args` (`--name VALUE`, `--name=VALUE`, a switch alone; the
// arguments that are no flag for the positional option; of a repeated flag, the last). Throws
// UsageError, naming the command, for a flag without a value, a required flag missing, and, unless
// `training_options` lets the rest through to resolve(), an unknown flag or a stray argument.
// An unknown flag is "unknown flag '--dtpye' (did you mean '--dtype'?)" among the command's and,
// with `training_options`, the training flags.
CommandArgs split_command_args(std::string_view command, const std::vector<const OptionInfo*>& flags,
                               const std::vector<std::string>& args, bool training_options);

// The command's settings from `args`: each given flag stored through its option (a bad value is
// the option's one-line error, "invalid value 'x' for dtype (flag --dtype): expected ..."), every
// other member at its default. `training_args`, when given, receives the arguments that are not
// the command's, for resolve(); without it they are errors.
template <class T>
T parse_command_flags(std::string_view command, const FlagTable<T>& table,
                      const std::vector<std::string>& args,
                      std::vector<std::string>* training_args = nullptr) {
  std::vector<const OptionInfo*> flags;
  for (const auto& option : table) flags.push_back(&option);
  auto split = split_command_args(command, flags, args, training_args != nullptr);
  T settings{};
  for (const auto& [index, text] : split.own) {
    const auto& option = table[index];
    option.set(settings, text, {Source::Kind::flag, "--" + option.name});
  }
  if (training_args != nullptr) *training_args = std::move(split.rest);
  return settings;
}

// Training flags taken out of an argument list that goes on to `ampt train` (compare and
// recommend set --max_steps, --batch_size ... themselves): the values given for `names`, and the
// other arguments in order. A switch among `names` takes a value only as `--name=VALUE`.
struct TakenFlags {
  std::map<std::string, std::string> values;
  std::vector<std::string> rest;
};
TakenFlags take_flags(const std::vector<std::string>& args, const std::vector<std::string>& names);

// `ampt <command> --help`: `usage`, the command's own flags with their help, constraint and
// default and, where `training_catalog` is given (the command takes the training options), every
// training option after them as `ampt train --help` lists it.
std::string command_help(std::string_view command, std::string_view usage,
                         const std::vector<FlagReference>& flags, const Catalog* training_catalog);

}  // namespace ampt::config

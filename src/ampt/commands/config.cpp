#include "ampt/commands/config.h"

#include "ampt/config/command_flags.h"
#include "ampt/config/describe.h"
#include "ampt/config/reference.h"
#include "ampt/config/resolve.h"
#include "ampt/models/catalog.h"

#include <cstdio>

namespace ampt::commands {
namespace {

struct ConfigSettings {
  bool list_options = false;
  bool markdown = false;
};

const config::FlagTable<ConfigSettings>& config_flags() {
  using S = ConfigSettings;
  static const config::FlagTable<S> table = {
      config::flag_only(config::bool_option(
          "list_options", "", &S::list_options,
          "List every flag of every command (its YAML key, AMPT_ variable and default) instead "
          "of resolving a configuration")),
      config::flag_only(config::bool_option(
          "markdown", "", &S::markdown,
          "With --list_options: as Markdown, the form of docs/options.md")),
  };
  return table;
}

// Every command as the reference lists it.
std::vector<config::CommandReference> command_references() {
  std::vector<config::CommandReference> references;
  for (const auto& command : all()) {
    references.push_back({command.name, command.summary,
                          command.flags ? command.flags() : std::vector<config::FlagReference>{},
                          command.training_options});
  }
  return references;
}

}  // namespace

std::vector<config::FlagReference> config_flag_references() {
  return config::flag_references(config_flags());
}

std::string config_help() {
  return config::command_help("config",
                              "Usage: ampt config [--list_options [--markdown]] [TRAINING "
                              "OPTIONS]...\n\n"
                              "Print the configuration these options resolve to and where each "
                              "value came from\n(default, file:line, env AMPT_X, flag --x).",
                              config_flag_references(), &models::catalog());
}

int run_config(const std::vector<std::string>& args, const Environment& env) {
  std::vector<std::string> training_args;
  const auto flags = config::parse_command_flags("config", config_flags(), args, &training_args);
  if (flags.markdown && !flags.list_options) {
    throw UsageError("--markdown is a form of --list_options: give both");
  }
  if (flags.list_options) {
    if (!training_args.empty()) {
      throw UsageError("--list_options lists every option; it takes no training options (given: " +
                       training_args.front() + ")");
    }
    const auto references = command_references();
    const auto text = flags.markdown ? config::options_markdown(references, models::catalog())
                                     : config::options_listing(references, models::catalog());
    std::fputs(text.c_str(), stdout);
    return 0;
  }
  std::fputs(config::describe(config::resolve(training_args, env, models::catalog())).c_str(),
             stdout);
  return 0;
}

}  // namespace ampt::commands

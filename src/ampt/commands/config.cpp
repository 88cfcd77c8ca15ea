#include "ampt/commands/config.h"

#include "ampt/config/describe.h"
#include "ampt/config/resolve.h"
#include "ampt/models/catalog.h"

#include <cstdio>

namespace ampt::commands {

std::string config_help() { return config::help_text("ampt config", models::catalog()); }

int run_config(const std::vector<std::string>& args, const Environment& env) {
  std::fputs(config::describe(config::resolve(args, env, models::catalog())).c_str(), stdout);
  return 0;
}

}  // namespace ampt::commands

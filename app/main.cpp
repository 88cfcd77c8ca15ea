// ampt's entry point: argv → a command → an exit code. Errors thrown anywhere below become one
// line on stderr and a non-zero status here.
#include "ampt/commands/command.h"
#include "ampt/config/resolve.h"
#include "ampt/config/suggest.h"
#include "ampt/core/allocator.h"
#include "ampt/core/errors.h"
#include "ampt/core/version.h"
#include "ampt/device/cpu_math.h"
#include "ampt/log/logger.h"

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <torch/version.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

extern char** environ;

namespace {

using ampt::commands::kRuntimeError;
using ampt::commands::kUsageError;

std::string usage() {
  std::string text = "usage: ampt <command> [flags]\n\ncommands:\n";
  for (const auto& command : ampt::commands::all()) {
    text += fmt::format("  {:<9} {}\n", command.name, command.summary);
  }
  return text +
         "\n"
         "  ampt <command> --help   flags of a command\n"
         "  ampt --version          version and build\n";
}

ampt::commands::Environment environment() {
  ampt::commands::Environment env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    const auto eq = entry.find('=');
    if (eq != std::string::npos) env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return env;
}

int dispatch(const std::vector<std::string>& argv) {
  if (argv.empty()) {
    std::fputs(usage().c_str(), stderr);
    return kUsageError;
  }
  const auto& name = argv.front();
  const std::vector<std::string> args(argv.begin() + 1, argv.end());
  if (name == "--help" || name == "-h" || name == "help") {
    std::fputs(usage().c_str(), stdout);
    return 0;
  }
  if (name == "--version") {
    fmt::print("ampt {} (git {}, LibTorch {}, malloc {})\n", ampt::kVersion, ampt::kGitRevision,
               TORCH_VERSION, ampt::malloc_in_use());
    return 0;
  }
  const auto& table = ampt::commands::all();
  const auto command = std::ranges::find(table, name, &ampt::commands::Command::name);
  if (command == table.end()) {
    std::vector<std::string> names;
    for (const auto& c : table) names.emplace_back(c.name);
    const auto near = ampt::config::closest(name, names);
    throw ampt::UsageError("unknown command '" + name + "'" +
                           (near ? " (did you mean '" + *near + "'?)" : "") + "; see ampt --help");
  }
  if (ampt::config::wants_help(args)) {
    std::fputs(command->help().c_str(), stdout);
    return 0;
  }
  return command->run(args, environment());
}

}  // namespace

int main(int argc, char** argv) {
  try {
    ampt::device::initialize_cpu_math();
    return dispatch(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const ampt::UsageError& e) {
    std::fprintf(stderr, "ampt: error: %s\n", e.what());
    return kUsageError;
  } catch (const ampt::RuntimeError& e) {
    std::fprintf(stderr, "ampt: error: %s\n", e.what());
    return kRuntimeError;
  } catch (const c10::Error& e) {
    // The full message carries torch's context lines and backtrace: shown under --debug only.
    const std::string message = ampt::log::debug_enabled() ? e.what() : ampt::message_of(e);
    std::fprintf(stderr, "ampt: error: torch: %s\n", message.c_str());
    return kRuntimeError;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ampt: error: %s\n", ampt::message_of(e).c_str());
    return kRuntimeError;
  }
}

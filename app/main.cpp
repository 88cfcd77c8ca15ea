// ampt's entry point: parse the command line, run a subcommand, turn errors into exit codes.
#include "ampt/config/describe.h"
#include "ampt/config/resolve.h"
#include "ampt/core/errors.h"
#include "ampt/core/version.h"
#include "ampt/config/suggest.h"
#include "ampt/log/console_reporter.h"
#include "ampt/log/logger.h"
#include "ampt/log/metrics_writer.h"
#include "ampt/train/trainer.h"

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <torch/version.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

extern char** environ;

namespace {

constexpr int kUsageError = 2;
constexpr int kRuntimeError = 1;

const char* kUsage =
    "usage: ampt <command> [flags]\n"
    "\n"
    "commands:\n"
    "  train     train a model with automatic mixed precision\n"
    "  config    print the resolved configuration and where each value came from\n"
    "\n"
    "  ampt <command> --help   flags of a command\n"
    "  ampt --version          version and build\n";

std::map<std::string, std::string> environment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    const auto eq = entry.find('=');
    if (eq != std::string::npos) env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return env;
}

int run_train(const std::vector<std::string>& args) {
  const auto resolved = ampt::config::resolve(args, environment());
  const auto& config = resolved.config();
  ampt::log::set_debug(config.debug);
  ampt::log::info("ampt {} (git {}, LibTorch {})", ampt::kVersion, ampt::kGitRevision,
                  TORCH_VERSION);
  if (config.debug) ampt::log::write_line(ampt::config::describe(resolved));
  ampt::log::MetricsWriter metrics(config.output_dir);
  ampt::log::ConsoleReporter console(isatty(STDOUT_FILENO) != 0, metrics.path());
  ampt::train::ObserverList observers;
  observers.add(console);
  observers.add(metrics);
  ampt::train::run_training(
      config, ampt::config::describe(resolved.source_of("mixed_precision")), observers);
  return 0;
}

int dispatch(const std::vector<std::string>& argv) {
  if (argv.empty()) {
    std::fputs(kUsage, stderr);
    return kUsageError;
  }
  const auto& command = argv.front();
  const std::vector<std::string> args(argv.begin() + 1, argv.end());
  if (command == "--help" || command == "-h" || command == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (command == "--version") {
    fmt::print("ampt {} (git {}, LibTorch {})\n", ampt::kVersion, ampt::kGitRevision,
               TORCH_VERSION);
    return 0;
  }
  if (command == "train" || command == "config") {
    if (ampt::config::wants_help(args)) {
      std::fputs(ampt::config::help_text("ampt " + command).c_str(), stdout);
      return 0;
    }
    if (command == "config") {
      std::fputs(ampt::config::describe(ampt::config::resolve(args, environment())).c_str(),
                 stdout);
      return 0;
    }
    return run_train(args);
  }
  const auto near = ampt::config::closest(command, {"train", "config"});
  throw ampt::UsageError("unknown command '" + command + "'" +
                         (near ? " (did you mean '" + *near + "'?)" : "") + "; see ampt --help");
}

// First line of a message: c10 errors append context and backtraces on later lines.
std::string first_line(const std::string& message) {
  return message.substr(0, message.find('\n'));
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return dispatch(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const ampt::UsageError& e) {
    std::fprintf(stderr, "ampt: error: %s\n", e.what());
    return kUsageError;
  } catch (const ampt::RuntimeError& e) {
    std::fprintf(stderr, "ampt: error: %s\n", e.what());
    return kRuntimeError;
  } catch (const c10::Error& e) {
    // The full message carries torch's context lines and backtrace: shown under --debug only.
    const std::string message = ampt::log::debug_enabled() ? e.what() : first_line(e.what_without_backtrace());
    std::fprintf(stderr, "ampt: error: torch: %s\n", message.c_str());
    return kRuntimeError;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ampt: error: %s\n", first_line(e.what()).c_str());
    return kRuntimeError;
  }
}

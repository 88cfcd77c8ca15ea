// ampt's entry point: parse the command line, run a subcommand, turn errors into exit codes.
#include "ampt/checkpoint/export_command.h"
#include "ampt/config/describe.h"
#include "ampt/config/resolve.h"
#include "ampt/core/errors.h"
#include "ampt/core/version.h"
#include "ampt/config/suggest.h"
#include "ampt/log/console_reporter.h"
#include "ampt/log/logger.h"
#include "ampt/log/metrics_writer.h"
#include "ampt/train/compare.h"
#include "ampt/train/preemption.h"
#include "ampt/train/recommend.h"
#include "ampt/train/trainer.h"

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <torch/version.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

extern char** environ;

namespace {

constexpr int kUsageError = 2;
constexpr int kRuntimeError = 1;
// Stopped by a preemption signal after saving: the sbatch script requeues the job on this status
// (EX_TEMPFAIL: "try again later").
constexpr int kRequeue = 75;
constexpr int kInterrupted = 130;

const char* kUsage =
    "usage: ampt <command> [flags]\n"
    "\n"
    "commands:\n"
    "  train     train a model with automatic mixed precision\n"
    "  config    print the resolved configuration and where each value came from\n"
    "  export    write a checkpoint's weights as safetensors\n"
    "  compare   train the same configuration in fp32, bf16, fp16 and compare them in one table\n"
    "  recommend estimate memory per precision and opt level; recommend a setup for a GPU\n"
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
  // In a distributed run rank 0 alone speaks and writes metrics; the others train silently.
  const bool main_rank = config.launch.is_main();
  if (main_rank) ampt::log::info("ampt {} (git {}, LibTorch {})", ampt::kVersion, ampt::kGitRevision,
                  TORCH_VERSION);
  const auto config_text = ampt::config::describe(resolved);
  if (config.debug && main_rank) ampt::log::write_line(config_text);
  std::optional<ampt::log::MetricsWriter> metrics;
  std::optional<ampt::log::ConsoleReporter> console;
  ampt::train::ObserverList observers;
  if (main_rank) {
    metrics.emplace(config.output_dir);
    console.emplace(isatty(STDOUT_FILENO) != 0, metrics->path());
    observers.add(*console);
    observers.add(*metrics);
  }

  const ampt::train::PreemptionWatch watch(ampt::train::signal_number(config.preempt_signal));
  ampt::train::RunContext context;
  context.precision_source = ampt::config::describe(resolved.source_of("mixed_precision"));
  context.config_text = config_text;
  context.stop_requested = &ampt::train::PreemptionWatch::requested;
  const auto summary = ampt::train::run_training(config, context, observers);
  if (summary.stop_signal == 0) return 0;
  const bool interrupted = summary.stop_signal == SIGINT;
  if (main_rank) ampt::log::info("[CKPT] Stopped by {} after step {}; resume with --resume auto{}",
                  ampt::train::signal_name(summary.stop_signal), summary.steps,
                  interrupted ? "" : fmt::format(" (exit status {}: requeue)", kRequeue));
  return interrupted ? kInterrupted : kRequeue;
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
  if (command == "export") {
    if (ampt::config::wants_help(args)) {
      std::fputs(ampt::checkpoint::export_help().c_str(), stdout);
      return 0;
    }
    std::fputs(ampt::checkpoint::run_export(args).c_str(), stdout);
    return 0;
  }
  if (command == "compare") {
    if (ampt::config::wants_help(args)) {
      std::fputs(ampt::train::compare_help().c_str(), stdout);
      return 0;
    }
    return ampt::train::run_compare(args, environment());
  }
  if (command == "recommend") {
    if (ampt::config::wants_help(args)) {
      std::fputs(ampt::train::recommend_help().c_str(), stdout);
      return 0;
    }
    std::fputs(ampt::train::run_recommend(args, environment()).c_str(), stdout);
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
  const auto near = ampt::config::closest(command, {"train", "config", "export", "compare", "recommend"});
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

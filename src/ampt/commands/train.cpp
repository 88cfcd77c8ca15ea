#include "ampt/commands/train.h"

#include "ampt/config/describe.h"
#include "ampt/config/report_to.h"
#include "ampt/config/resolve.h"
#include "ampt/core/version.h"
#include "ampt/log/console_reporter.h"
#include "ampt/log/csv_writer.h"
#include "ampt/log/logger.h"
#include "ampt/log/metrics_writer.h"
#include "ampt/log/run_plot.h"
#include "ampt/log/tensorboard_writer.h"
#include "ampt/models/catalog.h"
#include "ampt/train/preemption.h"
#include "ampt/train/trainer.h"

#include <fmt/format.h>
#include <torch/version.h>
#include <unistd.h>

#include <csignal>
#include <optional>

namespace ampt::commands {

std::string train_help() { return config::help_text("ampt train", models::catalog()); }

int run_train(const std::vector<std::string>& args, const Environment& env) {
  const auto resolved = config::resolve(args, env, models::catalog());
  const auto& config = resolved.config();
  log::set_debug(config.debug);
  // In a distributed run rank 0 alone speaks and writes metrics; the others train silently.
  const bool main_rank = config.launch.is_main();
  if (main_rank) log::info("ampt {} (git {}, LibTorch {})", kVersion, kGitRevision, TORCH_VERSION);
  const auto config_text = config::describe(resolved);
  if (config.debug && main_rank) log::write_line(config_text);
  // Every writer flushes what it writes at once, and an exception out of the run unwinds
  // through here (main catches it), closing the files: a failed run keeps every logged step.
  std::optional<log::MetricsWriter> metrics;
  std::optional<log::ConsoleReporter> console;
  std::optional<log::TensorBoardWriter> tensorboard;
  std::optional<log::CsvWriter> csv;
  std::optional<log::PlotAtEnd> plot;
  log::ObserverList observers;
  if (main_rank) {
    const auto report = config::report_targets(config.report_to);
    metrics.emplace(config.output_dir, report.jsonl);
    console.emplace(isatty(STDOUT_FILENO) != 0, metrics->path());
    observers.add(*console);
    observers.add(*metrics);
    if (report.tensorboard) observers.add(tensorboard.emplace(config.output_dir, config_text));
    if (report.csv) observers.add(csv.emplace(config.output_dir));
    if (report.plot) observers.add(plot.emplace(config.output_dir));
  }

  const train::PreemptionWatch watch(train::signal_number(config.preempt_signal));
  train::RunContext context;
  context.precision_source = config::describe(resolved.source_of("mixed_precision"));
  context.config_text = config_text;
  context.stop_requested = &train::PreemptionWatch::requested;
  const auto summary = train::run_training(config, context, observers);
  if (summary.stop_signal == 0) return 0;
  const bool interrupted = summary.stop_signal == SIGINT;
  if (main_rank) {
    log::info("[CKPT] Stopped by {} after step {}; resume with --resume auto{}",
              train::signal_name(summary.stop_signal), summary.steps,
              interrupted ? "" : fmt::format(" (exit status {}: requeue)", kRequeue));
  }
  return interrupted ? kInterrupted : kRequeue;
}

}  // namespace ampt::commands

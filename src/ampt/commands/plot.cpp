#include "ampt/commands/plot.h"

#include "ampt/config/command_flags.h"
#include "ampt/log/run_plot.h"

#include <fmt/format.h>

namespace ampt::commands {
namespace {

struct PlotSettings {
  std::string run_dir;
  std::string out;
};

const config::FlagTable<PlotSettings>& plot_flags() {
  using S = PlotSettings;
  static const config::FlagTable<S> table = {
      config::required(config::positional_option("run_dir", &S::run_dir, "RUN_DIR",
                                                 "The run's output_dir (it holds metrics.jsonl)")),
      config::default_noted(config::flag_only(config::string_option(
                                "out", "", &S::out, false, "FILE", "File to write")),
                            "RUN_DIR/run.svg"),
  };
  return table;
}

}  // namespace

std::vector<config::FlagReference> plot_flag_references() {
  return config::flag_references(plot_flags());
}

std::string plot_help() {
  return config::command_help(
      "plot",
      "Usage: ampt plot RUN_DIR [--out FILE]\n\n"
      "Draw a run's loss, learning rate, loss scale and throughput against the step, with\n"
      "precision switches and skipped steps marked, as an SVG any browser opens.",
      plot_flag_references(), nullptr);
}

int run_plot(const std::vector<std::string>& args, const Environment&) {
  const auto flags = config::parse_command_flags("plot", plot_flags(), args);
  fmt::print("wrote {}\n", log::write_run_plot(flags.run_dir, flags.out));
  return 0;
}

}  // namespace ampt::commands

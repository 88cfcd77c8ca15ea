#include "ampt/commands/plot.h"

#include "ampt/commands/own_flags.h"
#include "ampt/core/errors.h"
#include "ampt/log/run_plot.h"

#include <cxxopts.hpp>
#include <fmt/format.h>

namespace ampt::commands {
namespace {

cxxopts::Options plot_parser() {
  cxxopts::Options parser("ampt plot",
                          "Draw a run's loss, learning rate, loss scale and throughput against "
                          "the step, with precision switches and skipped steps marked, as an SVG "
                          "any browser opens.");
  parser.positional_help("RUN_DIR");
  parser.add_options()
      ("run_dir", "the run's output_dir (it holds metrics.jsonl)", cxxopts::value<std::string>(), "RUN_DIR")
      ("out", "file to write (default RUN_DIR/run.svg)", cxxopts::value<std::string>(), "FILE")
      ("h,help", "show this help");
  parser.parse_positional({"run_dir"});
  parser.allow_unrecognised_options();
  return parser;
}

}  // namespace

std::string plot_help() { return plot_parser().help(); }

int run_plot(const std::vector<std::string>& args, const Environment&) {
  auto parser = plot_parser();
  const auto result = parse_own_flags(parser, "plot", args, {"--out"});
  if (result.count("run_dir") == 0) {
    throw UsageError("ampt plot needs a run directory: ampt plot RUN_DIR [--out FILE]");
  }
  const auto out = result.count("out") > 0 ? result["out"].as<std::string>() : "";
  fmt::print("wrote {}\n", log::write_run_plot(result["run_dir"].as<std::string>(), out));
  return 0;
}

}  // namespace ampt::commands

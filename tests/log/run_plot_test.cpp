// The run picture from metrics.jsonl lines: a polyline point per finite logged value, marks for
// precision switches and skipped steps, clear errors when there is nothing to draw.
#include "ampt/log/run_plot.h"

#include "ampt/core/errors.h"
#include "support/process.h"

#include <catch2/catch.hpp>

#include <regex>

using ampt::test::make_temp_dir;
using ampt::test::write_file;

namespace {

// The number of "x,y" pairs in the points of the polyline with this id; -1 when there is none.
int points_of(const std::string& svg, const std::string& id) {
  std::smatch match;
  if (!std::regex_search(svg, match, std::regex("<polyline id=\"" + id + "\" points=\"([^\"]*)\""))) {
    return -1;
  }
  const std::string points = match[1];
  return static_cast<int>(std::count(points.begin(), points.end(), ',')) ;
}

int paths_in_group(const std::string& svg, const std::string& id) {
  const auto start = svg.find("<g id=\"" + id + "\"");
  const auto end = svg.find("</g>", start);
  int n = 0;
  for (auto at = svg.find("<path", start); at < end; at = svg.find("<path", at + 1)) ++n;
  return n;
}

const char* kMetrics =
    R"({"step": 1, "epoch": 0, "loss": 2.5, "lr": 0.001, "grad_norm": 1, "samples_per_sec": 10, "tokens_per_sec": 640, "mfu": 0, "peak_memory_bytes": 1, "loss_scaling": false, "scale": 1, "growth_tracker": 0, "overflows": 0, "skipped_steps": 0, "grad_underflow": null})" "\n"
    R"({"step": 5, "epoch": 0, "loss": 2.0, "lr": 0.002, "grad_norm": 1, "samples_per_sec": 10, "tokens_per_sec": 640, "mfu": 0, "peak_memory_bytes": 1, "loss_scaling": false, "scale": 1, "growth_tracker": 0, "overflows": 0, "skipped_steps": 0, "grad_underflow": null})" "\n"
    R"({"step": 5, "val_loss": 2.1, "val_perplexity": 8.2, "val_batches": 2})" "\n"
    R"({"step": 5, "event": "precision_switch", "epoch": 0, "from": "FP32", "to": "FP16", "stage": 2, "stages": 2, "stage_text": "fp16", "loss_scaling": true})" "\n"
    R"({"step": 10, "epoch": 0, "loss": null, "lr": 0.003, "grad_norm": null, "samples_per_sec": 10, "tokens_per_sec": 640, "mfu": 0, "peak_memory_bytes": 1, "loss_scaling": true, "scale": 32768, "growth_tracker": 0, "overflows": 3, "skipped_steps": 3, "grad_underflow": 0.01})" "\n"
    R"({"step": 15, "epoch": 0, "loss": 1.5, "lr": 0.002, "grad_norm": 1, "samples_per_sec": 10, "tokens_per_sec": 640, "mfu": 0, "peak_memory_bytes": 1, "loss_scaling": true, "scale": 16384, "growth_tracker": 2, "overflows": 4, "skipped_steps": 4, "grad_underflow": 0.01})" "\n"
    R"({"step": 20, "epoch": 0, "loss": 1.2, "lr": 0.001, "grad_norm": 1, "samples_per_sec": 10, "tokens_per_sec": 640, "mfu": 0, "peak_memory_bytes": 1, "loss_scaling": true, "scale": 16384, "growth_tracker": 7, "overflows": 4, "skipped_steps": 4, "grad_underflow": 0.01})" "\n"
    R"({"step": 25, "epoch": 0, "loss": 1.)";  // a line cut short by a killed run

}  // namespace

TEST_CASE("run plot: a point per finite logged value, switches and skipped steps marked", "[log][plot]") {
  const auto dir = make_temp_dir();
  write_file(dir + "/metrics.jsonl", kMetrics);
  const auto records = ampt::log::read_metrics_jsonl(dir + "/metrics.jsonl");
  REQUIRE(records.size() == 7);
  CHECK(records[4].number("loss") != records[4].number("loss"));  // null reads as NaN
  CHECK(records[3].text("to") == "FP16");
  CHECK(records[3].text("loss_scaling") == "true");

  const auto svg = ampt::log::plot_svg(records, "runs/<a&b>");
  CHECK(points_of(svg, "train-loss") == 4);  // the null loss at step 10 is left out
  CHECK(points_of(svg, "val-loss") == 1);
  CHECK(points_of(svg, "lr") == 5);
  CHECK(points_of(svg, "loss-scale") == 3);
  CHECK(points_of(svg, "throughput") == 5);
  CHECK(paths_in_group(svg, "precision-switches") == 1);
  CHECK(paths_in_group(svg, "skipped-steps") == 2);  // steps 10 (3 skipped) and 15 (1 more)
  CHECK_THAT(svg, Catch::Contains("tokens/s") && Catch::Contains("FP32 → FP16"));
  CHECK_THAT(svg, Catch::Contains("runs/&lt;a&amp;b&gt;"));

  CHECK(ampt::log::write_run_plot(dir) == dir + "/run.svg");
  CHECK(ampt::test::read_file(dir + "/run.svg") == ampt::log::plot_svg(records, dir));
}

TEST_CASE("run plot: nothing to draw is a clear error", "[log][plot]") {
  const auto dir = make_temp_dir();
  CHECK_THROWS_WITH(ampt::log::write_run_plot(dir),
                    Catch::StartsWith("no metrics.jsonl in '" + dir + "'"));
  write_file(dir + "/metrics.jsonl", R"({"step": 10, "val_loss": 2.1, "val_accuracy": 0.5, "val_batches": 2})" "\n");
  CHECK_THROWS_WITH(ampt::log::write_run_plot(dir),
                    "cannot plot '" + dir + "/metrics.jsonl': no logged steps to plot");
}

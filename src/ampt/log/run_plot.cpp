#include "ampt/log/run_plot.h"

#include "ampt/core/errors.h"
#include "ampt/log/logger.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

namespace ampt::log {
namespace {

namespace fs = std::filesystem;

constexpr double kWidth = 960.0;
constexpr double kLeft = 90.0;
constexpr double kRight = 30.0;
constexpr double kTop = 80.0;
constexpr double kPanelHeight = 170.0;
constexpr double kPanelGap = 60.0;  // room for a panel's step labels and the next one's title
constexpr double kPlotWidth = kWidth - kLeft - kRight;

struct Point {
  double step;
  double value;
};

struct Series {
  std::string id;
  std::string label;
  std::string color;
  std::vector<Point> points;
};

struct Panel {
  std::string title;
  std::vector<Series> series;
  bool log2 = false;       // values drawn on a log2 axis (the loss scale doubles and halves)
  std::string empty_note;  // shown when no series has a point
};

struct Mark {
  double step;
  std::string label;
};

std::string escape(std::string_view text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// About `target` round values (1, 2 or 5 times a power of ten apart) covering [lo, hi].
std::vector<double> nice_ticks(double lo, double hi, int target) {
  const double raw = (hi - lo) / target;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double spacing = magnitude;
  for (const double factor : {2.0, 5.0, 10.0}) {
    if (spacing >= raw) break;
    spacing = magnitude * factor;
  }
  std::vector<double> ticks;
  for (double t = std::ceil(lo / spacing - 1e-9) * spacing; t <= hi + spacing * 1e-9; t += spacing) {
    ticks.push_back(std::abs(t) < spacing * 1e-9 ? 0.0 : t);
  }
  return ticks;
}

// [lo, hi] of the values, widened when they are all equal.
std::pair<double, double> value_range(const Panel& panel) {
  double lo = INFINITY;
  double hi = -INFINITY;
  for (const auto& s : panel.series) {
    for (const auto& p : s.points) {
      const double v = panel.log2 ? std::log2(p.value) : p.value;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  }
  if (hi - lo < 1e-12 * std::max(1.0, std::abs(hi))) {
    const double pad = panel.log2 ? 1.0 : std::max(std::abs(hi) * 0.1, 1e-12);
    lo -= pad;
    hi += pad;
  }
  return {lo, hi};
}

class Drawing {
 public:
  Drawing(double first_step, double last_step, std::size_t panels)
      : first_(first_step), last_(last_step > first_step ? last_step : first_step + 1.0),
        panels_(panels) {}

  double bottom() const { return panel_top(panels_ - 1) + kPanelHeight; }
  double height() const { return bottom() + 46.0; }
  double x(double step) const { return kLeft + (step - first_) / (last_ - first_) * kPlotWidth; }
  static double panel_top(std::size_t index) {
    return kTop + static_cast<double>(index) * (kPanelHeight + kPanelGap);
  }

  // The panel's box, its title with a legend, and the step labels under it.
  std::string frame(const Panel& panel, std::size_t index) const {
    const double top = panel_top(index);
    std::string svg = fmt::format(
        R"(<rect x="{}" y="{}" width="{}" height="{}" fill="#fff" stroke="#bbb"/>)" "\n"
        R"(<text x="{}" y="{}"><tspan font-weight="bold">{}</tspan>)",
        kLeft, top, kPlotWidth, kPanelHeight, kLeft, top - 10, escape(panel.title));
    for (const auto& s : panel.series) {
      if (s.label == panel.title) continue;
      svg += fmt::format(R"(<tspan dx="14" fill="{}">━ {}</tspan>)", s.color, escape(s.label));
    }
    svg += "</text>\n";
    for (const double t : nice_ticks(first_, last_, 8)) {
      if (t != std::round(t)) continue;  // steps are whole
      svg += fmt::format(R"(<text x="{:.1f}" y="{}" text-anchor="middle" fill="#555">{}</text>)" "\n",
                         x(t), top + kPanelHeight + 16, t);
    }
    return svg;
  }

  // The value grid and labels and one polyline per series, or the panel's note when it has no
  // values.
  std::string curves(const Panel& panel, std::size_t index) const {
    const double top = panel_top(index);
    const bool empty =
        std::ranges::all_of(panel.series, [](const Series& s) { return s.points.empty(); });
    if (empty) {
      return fmt::format(R"(<text x="{}" y="{}" text-anchor="middle" fill="#888">{}</text>)" "\n",
                         kLeft + kPlotWidth / 2, top + kPanelHeight / 2, escape(panel.empty_note));
    }
    const auto [lo, hi] = value_range(panel);
    const auto y = [&, lo = lo, hi = hi](double v) {
      const double t = panel.log2 ? std::log2(v) : v;
      return top + kPanelHeight - (t - lo) / (hi - lo) * kPanelHeight;
    };
    std::string svg;
    for (const double t : panel.log2 ? log2_ticks(lo, hi) : nice_ticks(lo, hi, 4)) {
      const double value = panel.log2 ? std::exp2(t) : t;
      svg += fmt::format(
          R"(<line x1="{0}" x2="{1}" y1="{2:.1f}" y2="{2:.1f}" stroke="#eee"/>)"
          R"(<text x="{3}" y="{4:.1f}" text-anchor="end" fill="#555">{5}</text>)" "\n",
          kLeft, kLeft + kPlotWidth, y(value), kLeft - 6, y(value) + 4,
          panel.log2 ? fmt::format("2^{}", t) : fmt::format("{:.6g}", t));
    }
    for (const auto& s : panel.series) {
      if (s.points.empty()) continue;  // no evaluation yet, say
      std::string points;
      for (const auto& p : s.points) {
        points += fmt::format("{}{:.1f},{:.1f}", points.empty() ? "" : " ", x(p.step), y(p.value));
      }
      svg += fmt::format(
          R"(<polyline id="{}" points="{}" fill="none" stroke="{}" stroke-width="1.5" )"
          R"svg(marker-start="url(#dot)" marker-mid="url(#dot)" marker-end="url(#dot)"/>)svg" "\n",
          s.id, points, s.color);
    }
    return svg;
  }

  // One <path> per mark, in a group named `id`: a vertical line through every panel, with the
  // label as its tooltip (and written in the first panel when `labelled`).
  std::string marks(const std::vector<Mark>& marks, const std::string& id, const std::string& style,
                    bool labelled) const {
    std::string svg = fmt::format(R"(<g id="{}" {}>)" "\n", id, style);
    for (const auto& m : marks) {
      std::string path;
      for (std::size_t i = 0; i < panels_; ++i) {
        path += fmt::format("M{:.1f},{} v{} ", x(m.step), panel_top(i), kPanelHeight);
      }
      svg += fmt::format(R"(<path d="{}"><title>{}</title></path>)" "\n", path, escape(m.label));
      if (labelled) {
        svg += fmt::format(
            R"(<text x="{:.1f}" y="{}" font-size="11" fill="#444" stroke="none">{}</text>)" "\n",
            x(m.step) + 4, kTop + 14, escape(m.label));
      }
    }
    return svg + "</g>\n";
  }

 private:
  static std::vector<double> log2_ticks(double lo, double hi) {
    const double spacing = std::max(1.0, std::ceil((hi - lo) / 4));
    std::vector<double> ticks;
    for (double t = std::ceil(lo / spacing) * spacing; t <= hi; t += spacing) ticks.push_back(t);
    return ticks;
  }

  double first_;
  double last_;
  std::size_t panels_;
};

bool is_step(const MetricsRecord& r) { return r.has("loss"); }

void add_point(Series& series, double step, double value) {
  if (std::isfinite(step) && std::isfinite(value)) series.points.push_back({step, value});
}

}  // namespace

std::string plot_svg(const std::vector<MetricsRecord>& records, const std::string& title) {
  Series train{"train-loss", "train", "#1f77b4", {}};
  Series val{"val-loss", "validation", "#ff7f0e", {}};
  Series lr{"lr", "learning rate", "#2ca02c", {}};
  Series scale{"loss-scale", "loss scale", "#9467bd", {}};
  // A language model logs tokens/s = samples/s x tokens per sample; other models log them equal.
  bool tokens = false;
  for (const auto& r : records) {
    const double tokens_per_sec = r.number("tokens_per_sec");
    if (is_step(r) && std::isfinite(tokens_per_sec) && tokens_per_sec != r.number("samples_per_sec")) {
      tokens = true;
    }
  }
  Series speed{"throughput", tokens ? "tokens/s" : "samples/s", "#d62728", {}};
  std::vector<Mark> switches;
  std::vector<Mark> skips;
  double first = INFINITY;
  double last = -INFINITY;
  double skipped_before = 0.0;
  int64_t steps = 0;
  std::string precisions;
  for (const auto& r : records) {
    const double step = r.number("step");
    if (!std::isfinite(step)) continue;
    first = std::min(first, step);
    last = std::max(last, step);
    if (is_step(r)) {
      ++steps;
      add_point(train, step, r.number("loss"));
      add_point(lr, step, r.number("lr"));
      if (r.text("loss_scaling") == "true") add_point(scale, step, r.number("scale"));
      add_point(speed, step, r.number(tokens ? "tokens_per_sec" : "samples_per_sec"));
      const double skipped = r.number("skipped_steps");
      if (skipped > skipped_before) {
        skips.push_back({step, fmt::format("step {}: {} optimizer steps skipped since the last "
                                           "logged step (non-finite gradients)",
                                           step, skipped - skipped_before)});
      }
      if (std::isfinite(skipped)) skipped_before = skipped;
    } else if (r.has("val_loss")) {
      add_point(val, step, r.number("val_loss"));
    } else if (r.text("event") == "precision_switch") {
      switches.push_back({step, fmt::format("{} → {}", r.text("from"), r.text("to"))});
      if (precisions.empty()) precisions = r.text("from");
      precisions += " → " + r.text("to");
    }
  }
  if (steps == 0) throw RuntimeError("no logged steps to plot");

  const std::vector<Panel> panels = {
      {"loss", {train, val}, false, ""},
      {"learning rate", {lr}, false, ""},
      {"loss scale", {scale}, true, "no loss scaling in this run"},
      {"throughput", {speed}, false, ""},
  };
  const Drawing drawing(first, last, panels.size());
  std::string svg = fmt::format(
      R"(<?xml version="1.0" encoding="UTF-8"?>)" "\n"
      R"(<svg xmlns="http://www.w3.org/2000/svg" width="{0}" height="{1}" viewBox="0 0 {0} {1}" )"
      R"(font-family="sans-serif" font-size="12">)" "\n"
      R"(<defs><marker id="dot" viewBox="0 0 4 4" refX="2" refY="2" markerWidth="4" )"
      R"(markerHeight="4"><circle cx="2" cy="2" r="1.5" fill="#444"/></marker></defs>)" "\n"
      R"(<rect width="100%" height="100%" fill="#fafafa"/>)" "\n"
      R"(<text x="{2}" y="24" font-size="16" font-weight="bold">{3}</text>)" "\n"
      R"(<text x="{2}" y="44" fill="#555">steps {4}–{5}, {6} logged; {7} optimizer steps skipped{8})"
      R"(<tspan dx="14" fill="#d62728">│ logged step after skipped steps</tspan>)"
      R"(<tspan dx="14" fill="#444">┆ precision switch</tspan></text>)" "\n",
      kWidth, drawing.height(), kLeft, escape(title), first, last, steps, skipped_before,
      precisions.empty() ? "" : "; precision " + escape(precisions));
  for (std::size_t i = 0; i < panels.size(); ++i) svg += drawing.frame(panels[i], i);
  svg += drawing.marks(skips, "skipped-steps", R"(stroke="#d62728" stroke-opacity="0.4")", false);
  svg += drawing.marks(switches, "precision-switches", R"(stroke="#444" stroke-dasharray="4 3")",
                       true);
  for (std::size_t i = 0; i < panels.size(); ++i) svg += drawing.curves(panels[i], i);
  svg += fmt::format(R"(<text x="{}" y="{}" text-anchor="middle" fill="#555">step</text>)" "\n",
                     kLeft + kPlotWidth / 2, drawing.bottom() + 34);
  return svg + "</svg>\n";
}

std::string write_run_plot(const std::string& run_dir, const std::string& out) {
  const auto metrics = fs::path(run_dir) / "metrics.jsonl";
  if (!fs::exists(metrics)) {
    throw RuntimeError(fmt::format("no metrics.jsonl in '{}': ampt plot draws the steps a run "
                                   "logged there (ampt train --report_to jsonl, the default)",
                                   run_dir));
  }
  const auto records = read_metrics_jsonl(metrics.string());
  std::string svg;
  try {
    svg = plot_svg(records, fs::path(run_dir).lexically_normal().string());
  } catch (const RuntimeError& e) {
    throw RuntimeError(fmt::format("cannot plot '{}': {}", metrics.string(), e.what()));
  }
  const auto path = out.empty() ? (fs::path(run_dir) / "run.svg").string() : out;
  std::ofstream file(path, std::ios::trunc);
  file << svg;
  if (!file.flush()) throw RuntimeError("cannot write '" + path + "'");
  return path;
}

void PlotAtEnd::on_end(const RunSummary&) {
  // The run itself has succeeded: a picture that cannot be drawn is worth a warning, not a failure.
  try {
    log::info("Plot:             {}", write_run_plot(run_dir_));
  } catch (const RuntimeError& e) {
    log::warn("no run.svg: {}", e.what());
  }
}

}  // namespace ampt::log

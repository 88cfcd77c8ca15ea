#include "ampt/commands/compare_report.h"

#include "ampt/core/errors.h"
#include "ampt/core/json_text.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

namespace ampt::commands {
namespace {

namespace fs = std::filesystem;

double number_or_nan(const YAML::Node& node) {
  if (!node || node.IsNull()) return std::numeric_limits<double>::quiet_NaN();
  return node.as<double>();
}

std::string human_bytes(int64_t bytes) {
  const double mib = static_cast<double>(bytes) / (1024.0 * 1024.0);
  return mib >= 1024.0 ? fmt::format("{:.2f} GiB", mib / 1024.0) : fmt::format("{:.1f} MiB", mib);
}

std::string human_rate(double rate) {
  if (rate >= 1e6) return fmt::format("{:.2f}M", rate / 1e6);
  if (rate >= 1e4) return fmt::format("{:.1f}K", rate / 1e3);
  return fmt::format("{:.0f}", rate);
}

double throughput(const CompareReport& report, const FormatResult& r) {
  return report.language_model ? r.tokens_per_sec : r.samples_per_sec;
}

// The numbers a row shows, NaN where there is nothing to show.
struct Row {
  double memory_ratio, speed_ratio, delta_loss;
};

Row ratios(const CompareReport& report, const FormatResult& r) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const auto* base = baseline_of(report);
  if (base == nullptr || !r.error.empty()) return {nan, nan, nan};
  return {static_cast<double>(r.peak_memory_bytes) /
              std::max<double>(1.0, static_cast<double>(base->peak_memory_bytes)),
          throughput(report, r) / std::max(1e-12, throughput(report, *base)),
          r.final_loss - base->final_loss};
}

std::string fixed(double value, const char* format) {
  return std::isfinite(value) ? fmt::format(fmt::runtime(format), value) : "–";
}

}  // namespace

const FormatResult* baseline_of(const CompareReport& report) {
  for (const auto& r : report.results) {
    if (r.format == report.baseline && r.error.empty()) return &r;
  }
  return nullptr;
}

std::string stability(const FormatResult& r, int64_t requested_steps) {
  if (!r.error.empty()) return "failed: " + r.error;
  // Skipped steps leave the loss where it was: a run that skipped most of its steps did not train.
  if (!std::isfinite(r.final_loss) || r.final_loss > 1.2 * r.initial_loss ||
      2 * r.skipped_steps > r.steps) {
    return "diverged";
  }
  if (r.steps < requested_steps) return fmt::format("stopped at step {}", r.steps);
  if (r.skipped_steps > 0) {
    return fmt::format("{} overflow{}", r.skipped_steps, r.skipped_steps == 1 ? "" : "s");
  }
  return "ok";
}

std::optional<FormatResult> read_summary(const std::string& format, const std::string& output_dir) {
  const auto path = fs::path(output_dir) / "summary.json";
  if (!fs::exists(path)) return std::nullopt;
  YAML::Node s;
  try {
    s = YAML::LoadFile(path.string());  // JSON is YAML
  } catch (const YAML::Exception& e) {
    throw RuntimeError(fmt::format("cannot read '{}': {}", path.string(), e.what()));
  }
  FormatResult r;
  r.format = format;
  r.output_dir = output_dir;
  try {
    r.steps = s["steps"].as<int64_t>();
    r.initial_loss = number_or_nan(s["initial_loss"]);
    r.final_loss = number_or_nan(s["final_loss"]);
    const double val = number_or_nan(s["final_val_loss"]);
    r.final_val_loss = std::isfinite(val) ? val : -1.0;
    r.skipped_steps = s["skipped_steps"].as<int64_t>();
    r.samples_per_sec = number_or_nan(s["samples_per_sec"]);
    r.tokens_per_sec = number_or_nan(s["tokens_per_sec"]);
    r.seconds = number_or_nan(s["seconds"]);
    r.peak_memory_bytes = s["peak_memory_bytes"].as<int64_t>();
    r.peak_memory_kind = s["peak_memory_kind"].as<std::string>();
  } catch (const YAML::Exception& e) {
    throw RuntimeError(fmt::format("'{}' lacks a field compare needs: {}", path.string(), e.what()));
  }
  return r;
}

std::string compare_markdown(const CompareReport& report) {
  const auto& b = report.baseline;
  const char* unit = report.language_model ? "tok/s" : "samples/s";
  std::string text = fmt::format(
      "| Format | Peak memory | Memory vs {0} | Throughput | Speed vs {0} | Final loss | "
      "Δ loss vs {0} | Skipped steps | Stability |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|---|\n",
      b);
  for (const auto& r : report.results) {
    const auto row = ratios(report, r);
    if (!r.error.empty()) {
      text += fmt::format("| {} | – | – | – | – | – | – | – | {} |\n", r.format,
                          stability(r, report.steps));
      continue;
    }
    text += fmt::format("| {} | {} | {} | {} {} | {} | {} | {} | {} of {} | {} |\n", r.format,
                        human_bytes(r.peak_memory_bytes), fixed(row.memory_ratio, "{:.2f}×"),
                        human_rate(throughput(report, r)), unit,
                        fixed(row.speed_ratio, "{:.2f}×"), fixed(r.final_loss, "{:.4f}"),
                        fixed(row.delta_loss, "{:+.4f}"), r.skipped_steps, r.steps,
                        stability(r, report.steps));
  }
  return text;
}

std::string compare_csv(const CompareReport& report) {
  std::string text =
      "format,peak_memory_bytes,memory_vs_baseline,throughput,throughput_unit,speed_vs_baseline,"
      "final_loss,delta_loss_vs_baseline,skipped_steps,steps,stability,baseline\n";
  const auto csv_number = [](double v) { return std::isfinite(v) ? fmt::format("{}", v) : ""; };
  for (const auto& r : report.results) {
    const auto row = ratios(report, r);
    std::string status = stability(r, report.steps);
    std::ranges::replace(status, '"', '\'');
    const bool ran = r.error.empty();
    text += fmt::format("{},{},{},{},{},{},{},{},{},{},\"{}\",{}\n", r.format,
                        ran ? fmt::format("{}", r.peak_memory_bytes) : "",
                        csv_number(row.memory_ratio),
                        ran ? csv_number(throughput(report, r)) : "",
                        report.language_model ? "tokens/s" : "samples/s",
                        csv_number(row.speed_ratio), ran ? csv_number(r.final_loss) : "",
                        csv_number(row.delta_loss), ran ? fmt::format("{}", r.skipped_steps) : "",
                        ran ? fmt::format("{}", r.steps) : "", status, report.baseline);
  }
  return text;
}

std::string compare_json(const CompareReport& report) {
  std::vector<std::string> rows;
  for (const auto& r : report.results) {
    const auto row = ratios(report, r);
    const bool ran = r.error.empty();
    const double nan = std::numeric_limits<double>::quiet_NaN();
    rows.push_back(fmt::format(
        R"(    {{"format": {}, "stability": {}, "steps": {}, "peak_memory_bytes": {}, )"
        R"("memory_vs_baseline": {}, "throughput": {}, "speed_vs_baseline": {}, )"
        R"("initial_loss": {}, "final_loss": {}, "delta_loss_vs_baseline": {}, )"
        R"("final_val_loss": {}, "skipped_steps": {}, "seconds": {}, "output_dir": {}}})",
        json_string(r.format), json_string(stability(r, report.steps)), r.steps,
        ran ? fmt::format("{}", r.peak_memory_bytes) : "null", json_number(row.memory_ratio),
        json_number(ran ? throughput(report, r) : nan), json_number(row.speed_ratio),
        json_number(ran ? r.initial_loss : nan), json_number(ran ? r.final_loss : nan),
        json_number(row.delta_loss), r.final_val_loss >= 0.0 ? json_number(r.final_val_loss) : "null",
        r.skipped_steps, json_number(ran ? r.seconds : nan), json_string(r.output_dir)));
  }
  std::string kind;
  for (const auto& r : report.results) {
    if (!r.peak_memory_kind.empty()) kind = r.peak_memory_kind;
  }
  return fmt::format(
      "{{\n  \"steps\": {},\n  \"baseline\": {},\n  \"throughput_unit\": {},\n"
      "  \"peak_memory_kind\": {},\n  \"formats\": [\n{}\n  ]\n}}\n",
      report.steps, json_string(report.baseline),
      json_string(report.language_model ? "tokens/s" : "samples/s"), json_string(kind),
      fmt::join(rows, ",\n"));
}

}  // namespace ampt::commands

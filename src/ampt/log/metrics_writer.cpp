#include "ampt/log/metrics_writer.h"

#include "ampt/core/errors.h"
#include "ampt/log/logger.h"

#include <cmath>
#include <filesystem>
#include <system_error>

namespace ampt::log {
namespace {

namespace fs = std::filesystem;

// JSON has no NaN or infinity: a diverged value is written as null.
std::string json_number(double value) {
  return std::isfinite(value) ? fmt::format("{}", value) : "null";
}

void write_or_throw(std::ofstream& out, const std::string& text, const std::string& path) {
  out << text << '\n';
  out.flush();
  if (!out) throw RuntimeError("cannot write metrics to '" + path + "'");
}

}  // namespace

MetricsWriter::MetricsWriter(const std::string& output_dir)
    : output_dir_(output_dir), path_((fs::path(output_dir) / "metrics.jsonl").string()) {
  std::error_code ec;
  fs::create_directories(output_dir, ec);
  if (ec) {
    throw RuntimeError("cannot create output_dir '" + output_dir + "': " + ec.message());
  }
  if (fs::exists(path_) && fs::file_size(path_, ec) > 0) {
    int n = 1;
    while (fs::exists(fs::path(output_dir) / fmt::format("metrics.{}.jsonl", n))) ++n;
    const auto kept = fs::path(output_dir) / fmt::format("metrics.{}.jsonl", n);
    fs::rename(path_, kept, ec);
    if (ec) throw RuntimeError("cannot rename '" + path_ + "': " + ec.message());
    log::info("[AMP] Kept the previous run's metrics as {}", kept.string());
  }
  out_.open(path_, std::ios::out | std::ios::trunc);
  if (!out_) throw RuntimeError("cannot open '" + path_ + "' for writing");
}

void MetricsWriter::on_step(const train::StepReport& r) {
  std::string line = fmt::format(
      R"({{"step": {}, "epoch": {}, "loss": {}, "lr": {}, "grad_norm": {}, "samples_per_sec": {}, )"
      R"("loss_scaling": {}, "scale": {}, "growth_tracker": {}, "overflows": {}, "skipped_steps": {}}})",
      r.step, r.epoch, json_number(r.loss), json_number(r.lr), json_number(r.grad_norm),
      json_number(r.samples_per_sec), r.loss_scaling, json_number(r.scale), r.growth_tracker,
      r.overflows, r.skipped_steps);
  write_or_throw(out_, line, path_);
}

void MetricsWriter::on_end(const train::RunSummary& s) {
  const auto summary_path = (fs::path(output_dir_) / "summary.json").string();
  std::ofstream summary(summary_path, std::ios::out | std::ios::trunc);
  write_or_throw(
      summary,
      fmt::format(
          R"({{"precision": "{}", "loss_scaling": {}, "steps": {}, "initial_loss": {}, )"
          R"("final_loss": {}, "skipped_steps": {}, "initial_scale": {}, "final_scale": {}, )"
          R"("samples_per_sec": {}, "seconds": {}, "peak_memory_bytes": {}, "peak_memory_kind": "{}"}})",
          s.precision, s.loss_scaling, s.steps, json_number(s.initial_loss),
          json_number(s.final_loss), s.skipped_steps, json_number(s.initial_scale),
          json_number(s.final_scale), json_number(s.samples_per_sec), json_number(s.seconds),
          s.peak_memory_bytes, s.peak_memory_kind),
      summary_path);
}

}  // namespace ampt::log

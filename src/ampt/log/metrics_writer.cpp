#include "ampt/log/metrics_writer.h"

#include "ampt/core/errors.h"
#include "ampt/core/json_text.h"
#include "ampt/log/run_files.h"
#include "ampt/log/logger.h"

#include <charconv>
#include <cmath>
#include <filesystem>
#include <system_error>

namespace ampt::log {
namespace {

namespace fs = std::filesystem;

void write_or_throw(std::ofstream& out, const std::string& text, const std::string& path) {
  out << text << '\n';
  out.flush();
  if (!out) throw RuntimeError("cannot write metrics to '" + path + "'");
}

// `, "PREFIXname": value` for each of an objective's figures (TRL's names: "rewards/chosen").
std::string json_figures(const std::vector<std::pair<std::string, double>>& figures,
                         std::string_view prefix) {
  std::string out;
  for (const auto& [name, value] : figures) {
    out += fmt::format(", {}: {}", json_string(std::string(prefix) + name), json_number(value));
  }
  return out;
}

}  // namespace

MetricsWriter::MetricsWriter(const std::string& output_dir, bool write_steps)
    : output_dir_(output_dir),
      path_(write_steps ? (fs::path(output_dir) / "metrics.jsonl").string() : "") {}

void MetricsWriter::on_start(const RunInfo& info) {
  std::error_code ec;
  fs::create_directories(output_dir_, ec);
  if (ec) {
    throw RuntimeError("cannot create output_dir '" + output_dir_ + "': " + ec.message());
  }
  if (path_.empty()) return;
  if (info.start_step > 0) {
    keep_lines_up_to(info.start_step);
    out_.open(path_, std::ios::out | std::ios::app);
  } else {
    keep_earlier_run();
    out_.open(path_, std::ios::out | std::ios::trunc);
  }
  if (!out_) throw RuntimeError("cannot open '" + path_ + "' for writing");
}

void MetricsWriter::keep_earlier_run() const {
  std::error_code ec;
  if (!fs::exists(path_) || fs::file_size(path_, ec) == 0) return;
  log::keep_earlier_run(path_, "metrics");
}

void MetricsWriter::keep_lines_up_to(int64_t step) const {
  std::ifstream in(path_);
  std::string kept;
  for (std::string line; std::getline(in, line);) {
    // Every line starts with {"step": N, as on_step writes it; a line cut short by a killed run
    // (no closing brace) is dropped.
    int64_t line_step = -1;
    if (const auto colon = line.find(':'); colon != std::string::npos && line.ends_with('}')) {
      const auto digits = line.find_first_not_of(' ', colon + 1);
      std::from_chars(line.data() + digits, line.data() + line.size(), line_step);
    }
    if (line_step >= 0 && line_step <= step) kept += line + '\n';
  }
  in.close();
  std::ofstream out(path_, std::ios::out | std::ios::trunc);
  out << kept;
  if (!out) throw RuntimeError("cannot rewrite '" + path_ + "'");
}

void MetricsWriter::on_step(const StepReport& r) {
  if (path_.empty()) return;
  std::string line = fmt::format(
      R"({{"step": {}, "epoch": {}, "loss": {}, "lr": {}, "grad_norm": {}, "samples_per_sec": {}, )"
      R"("tokens_per_sec": {}, "mfu": {}, "peak_memory_bytes": {}, "loss_scaling": {}, "scale": {}, )"
      R"("growth_tracker": {}, "overflows": {}, "skipped_steps": {}, "grad_underflow": {}{}}})",
      r.step, r.epoch, json_number(r.loss), json_number(r.lr), json_number(r.grad_norm),
      json_number(r.samples_per_sec), json_number(r.tokens_per_sec), json_number(r.mfu),
      r.peak_memory_bytes, r.loss_scaling, json_number(r.scale), r.growth_tracker, r.overflows,
      r.skipped_steps,
      r.grad_underflow >= 0.0 ? json_number(r.grad_underflow) : "null",
      (r.hysteresis >= 0 ? fmt::format(R"(, "hysteresis": {})", r.hysteresis) : std::string()) +
          json_figures(r.figures, ""));
  write_or_throw(out_, line, path_);
}

void MetricsWriter::on_eval(const EvalReport& r) {
  if (path_.empty() || r.batches == 0) return;
  if (!r.figures.empty()) {
    write_or_throw(out_,
                   fmt::format(R"({{"step": {}, "val_loss": {}{}, "val_batches": {}}})", r.step,
                               json_number(r.loss), json_figures(r.figures, "val_"), r.batches),
                   path_);
    return;
  }
  const auto quality = r.perplexity >= 0.0
                           ? fmt::format(R"("val_perplexity": {})", json_number(r.perplexity))
                           : fmt::format(R"("val_accuracy": {})", json_number(r.accuracy));
  write_or_throw(out_,
                 fmt::format(R"({{"step": {}, "val_loss": {}, {}, "val_batches": {}}})", r.step,
                             json_number(r.loss), quality, r.batches),
                 path_);
}

void MetricsWriter::on_precision_switch(const PrecisionSwitch& c) {
  if (path_.empty()) return;
  write_or_throw(out_,
                 fmt::format(R"({{"step": {}, "event": "precision_switch", "epoch": {}, "from": "{}", )"
                             R"("to": "{}", "stage": {}, "stages": {}, "stage_text": "{}", )"
                             R"("loss_scaling": {}}})",
                             c.step, c.epoch, c.from, c.to, c.stage, c.stages, c.stage_text,
                             c.loss_scaling),
                 path_);
}

void MetricsWriter::on_checkpoint(const CheckpointReport& r) {
  if (path_.empty()) return;
  write_or_throw(out_,
                 fmt::format(R"({{"step": {}, "event": "checkpoint", "path": {}, "bytes": {}, )"
                             R"("pause_seconds": {}, "wait_seconds": {}, "write_seconds": {}, )"
                             R"("error": {}}})",
                             r.step, json_string(r.path), r.bytes, json_number(r.pause_seconds),
                             json_number(r.wait_seconds), json_number(r.write_seconds),
                             r.error.empty() ? "null" : json_string(r.error)),
                 path_);
}

void MetricsWriter::on_end(const RunSummary& s) {
  const auto summary_path = (fs::path(output_dir_) / "summary.json").string();
  std::ofstream summary(summary_path, std::ios::out | std::ios::trunc);
  write_or_throw(
      summary,
      fmt::format(
          R"({{"precision": "{}", "loss_scaling": {}, "steps": {}, "initial_loss": {}, )"
          R"("final_loss": {}, "skipped_steps": {}, "initial_scale": {}, "final_scale": {}, )"
          R"("samples_per_sec": {}, "tokens_per_sec": {}, "steady_first_step": {}, )"
          R"("steady_last_step": {}, "initial_val_loss": {}, "final_val_loss": {}, "seconds": {}, )"
          R"("startup_seconds": {}, )"
          R"("training_seconds": {}, "eval_seconds": {}, "checkpoint_seconds": {}, )"
          R"("checkpoints_saved": {}, "checkpoint_bytes": {}, "checkpoint_write_seconds": {}, )"
          R"("final_save_skipped": {}, "peak_memory_bytes": {}, "peak_memory_kind": "{}"{}}})",
          s.precision, s.loss_scaling, s.steps, json_number(s.initial_loss),
          s.steps_this_run > 0 ? json_number(s.final_loss) : "null", s.skipped_steps,
          json_number(s.initial_scale), json_number(s.final_scale),
          json_number(s.samples_per_sec), json_number(s.tokens_per_sec), s.steady_first_step,
          s.steady_last_step, s.initial_val_loss >= 0.0 ? json_number(s.initial_val_loss) : "null",
          s.final_val_loss >= 0.0 ? json_number(s.final_val_loss) : "null",
          json_number(s.seconds), json_number(s.startup_seconds), json_number(s.training_seconds),
          json_number(s.eval_seconds), json_number(s.checkpoint_seconds), s.checkpoints_saved,
          s.checkpoint_bytes, json_number(s.checkpoint_write_seconds), s.final_save_skipped,
          s.peak_memory_bytes, s.peak_memory_kind,
          json_figures(s.initial_figures, "initial_") + json_figures(s.final_figures, "final_")),
      summary_path);
}

}  // namespace ampt::log

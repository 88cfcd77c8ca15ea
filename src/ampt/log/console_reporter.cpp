#include "ampt/log/console_reporter.h"

#include "ampt/log/logger.h"
#include "ampt/log/progress.h"

#include <fmt/ranges.h>

#include <cmath>
#include <utility>

namespace ampt::log {

std::string format_bytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  return fmt::format("{:.1f} {}", value, units[unit]);
}

ConsoleReporter::ConsoleReporter(bool progress_bar, std::string metrics_path)
    : progress_bar_(progress_bar), metrics_path_(std::move(metrics_path)) {}

void ConsoleReporter::on_data_progress(int64_t done, int64_t total, double elapsed_seconds) {
  if (!progress_bar_) return;
  set_status_line(done >= total ? ""
                                : "Tokenizing " + format_byte_progress(done, total, elapsed_seconds));
}

void ConsoleReporter::on_start(const RunInfo& info) {
  language_model_ = info.language_model;
  log::info("[AMP] Device: {} ({})", info.device, info.device_reason);
  log::info("[AMP] Model: {} ({}), {} parameters", info.model, info.architecture, info.parameters);
  if (!info.lora.empty()) log::info("[LoRA] {}", info.lora);
  if (!info.objective.empty()) log::info("[Objective] {}", info.objective);
  if (!info.pretrained.empty()) log::info("[AMP] Weights: pretrained, from {}", info.pretrained);
  log::info("[AMP] Data: {}", info.data_description);
  for (const auto& warning : info.warnings) log::warn("{}", warning);
  log::info("[AMP] Using {} {} ({})", info.precision,
            info.precision == "FP32" ? "precision" : "mixed precision",
            info.precision_schedule.empty()
                ? "mixed_precision from " + info.precision_source
                : fmt::format("precision_schedule stage {}", info.precision_stage));
  if (info.precision_fell_back) {
    log::warn("{}", info.precision_reason);
  } else if (!info.precision_reason.empty()) {
    log::info("[AMP] {}", info.precision_reason);
  }
  log::info("[AMP] Opt level {}: {}", info.opt_level, info.precision_explanation);
  if (!info.precision_schedule.empty()) {
    log::info("[AMP] Precision schedule: {} (starting in stage {} of {})",
              fmt::join(info.precision_schedule, ", "), info.precision_stage,
              info.precision_schedule.size());
  }
  for (const auto& line : info.compat_report) log::info("[AMP] Compat: {}", line);
  if (info.loss_scaling && info.static_scale > 0.0) {
    log::info("[AMP] GradScaler: static loss scale {} (never updated; non-finite steps still "
              "skipped)",
              info.static_scale);
  } else if (info.loss_scaling) {
    std::string extra;
    if (info.scaler_rules != "torch") {
      extra += fmt::format(", rules={}, hysteresis={}, consecutive_hysteresis={}",
                           info.scaler_rules, info.hysteresis, info.consecutive_hysteresis);
    }
    if (info.min_loss_scale > 0.0) extra += fmt::format(", min_loss_scale={}", info.min_loss_scale);
    if (info.max_loss_scale > 0.0) extra += fmt::format(", max_loss_scale={}", info.max_loss_scale);
    log::info("[AMP] GradScaler: on (init_scale={}, growth_factor={}, backoff_factor={}, "
              "growth_interval={}{})",
              info.init_scale, info.growth_factor, info.backoff_factor, info.growth_interval,
              extra);
  } else {
    log::info("[AMP] GradScaler: off; non-finite gradients still skip the optimizer step");
  }
  log::info("[AMP] Stability monitor: {}{}{}",
            info.max_consecutive_skips > 0
                ? fmt::format("save and stop after {} skipped steps in a row",
                              info.max_consecutive_skips)
                : std::string("never stops (max_consecutive_skips 0)"),
            info.deterministic ? fmt::format("; deterministic algorithms, seed {}", info.seed) : "",
            info.autocast_cache ? "" : "; autocast cache off");
  log::info("[AMP] Optimizer: {}; lr {:.3g} → {:.3g} (warmup {} steps, cosine), clip {}",
            info.optimizer, info.peak_lr, info.min_lr, info.warmup_steps,
            info.max_grad_norm > 0.0 ? fmt::format("grad norm {}", info.max_grad_norm) : "off");
  log::info("[AMP] Batch {} x {} accumulation = {} samples/step; {} steps ({} per epoch)",
            info.batch_size, info.grad_accum_steps, info.batch_size * info.grad_accum_steps,
            info.total_steps, info.steps_per_epoch);
  for (const auto& note : info.speed_notes) log::info("[PERF] {}", note);
  if (!info.distributed.empty()) log::info("[DIST] {}", info.distributed);
  if (!info.zero.empty()) log::info("[ZeRO] {}", info.zero);
  if (!info.resume_note.empty()) log::info("[CKPT] {}", info.resume_note);
}

namespace {

// "rewards/chosen 0.0123, rewards/rejected -0.0456, ...": an objective's figures.
std::string figure_list(const std::vector<std::pair<std::string, double>>& figures) {
  std::string out;
  for (const auto& [name, value] : figures) {
    out += fmt::format("{}{} {:.4f}", out.empty() ? "" : ", ", name, value);
  }
  return out;
}

}  // namespace

void ConsoleReporter::on_eval(const EvalReport& r) {
  if (r.batches == 0) return;
  if (!r.figures.empty()) {
    log::info("eval step {} | val loss {:.4f} | {} ({} batches)", r.step, r.loss,
              figure_list(r.figures), r.batches);
    return;
  }
  const auto quality = r.perplexity >= 0.0
                           ? fmt::format("val perplexity {:.3f}", r.perplexity)
                           : fmt::format("val accuracy {:.2f}%", 100.0 * r.accuracy);
  log::info("eval step {} | val loss {:.4f} | {} ({} batches)", r.step, r.loss, quality, r.batches);
}

void ConsoleReporter::on_precision_switch(const PrecisionSwitch& c) {
  log::info("[AMP] Precision switch at step {} (epoch {}): {} → {}, stage {} of {} ({}); "
            "GradScaler {}",
            c.step, c.epoch, c.from, c.to, c.stage, c.stages, c.stage_text,
            c.loss_scaling ? fmt::format("on at init_scale {}", c.init_scale) : "off");
  if (!c.reason.empty()) log::info("[AMP] {}", c.reason);
}

void ConsoleReporter::on_checkpoint(const CheckpointReport& r) {
  if (!r.error.empty()) {
    log::warn("checkpoint of step {} not saved: {}; training goes on, the next save tries again",
              r.step, r.error);
    return;
  }
  log::info("[CKPT] Saved step {} to {} ({} in {}, training paused {:.2f} s{})", r.step, r.path,
            format_bytes(r.bytes), format_duration(r.write_seconds), r.pause_seconds,
            r.wait_seconds > 0.0
                ? fmt::format(", {:.2f} s of it for the previous save's write", r.wait_seconds)
                : "");
}

void ConsoleReporter::on_profile(int64_t first, int64_t last, const std::string& trace,
                                 const std::string& table, const std::string& census) {
  log::info("[PERF] Profile of steps {}-{}: trace {} (open in ui.perfetto.dev or "
            "chrome://tracing), operators per step {}, step census by operator {}",
            first, last, trace, table, census);
}

void ConsoleReporter::on_census(const StepCensusReport& c) {
  const auto mib = [](int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); };
  std::string inside;
  for (const auto& [op, n] : c.ampt_conversion_ops) {
    inside += fmt::format("{}{} {}", inside.empty() ? ": " : ", ", op, n);
  }
  log::info("[PERF] Step census (step {}): {} operators, {} dtype conversions ({:.1f} MiB, {} of "
            "parameters or their gradients), of which {} inside ampt operations ({:.1f} MiB, {} "
            "of parameters or their gradients{}), {} host synchronisations, {} autograd nodes",
            c.step, c.operators, c.conversions, mib(c.conversion_bytes), c.parameter_conversions,
            c.ampt_conversions, mib(c.ampt_conversion_bytes), c.ampt_parameter_conversions,
            inside, c.host_syncs, c.autograd_nodes);
}

void ConsoleReporter::on_progress(int64_t step, int64_t total_steps, double elapsed_seconds) {
  if (!progress_bar_) return;
  // Redrawing at most ten times a second keeps the terminal cheap on fast steps.
  if (step != total_steps && elapsed_seconds - last_draw_ < 0.1) return;
  last_draw_ = elapsed_seconds;
  set_status_line(step == total_steps ? "" : format_progress(step, total_steps, elapsed_seconds));
}

void ConsoleReporter::on_step(const StepReport& r) {
  const auto throughput = language_model_
                              ? fmt::format("{:.0f} tok/s", r.tokens_per_sec)
                              : fmt::format("{:.0f} samples/s", r.samples_per_sec);
  log::info("step {:>{}}/{} | epoch {} | loss {:.4f} | lr {:.3e} | grad norm {:.4f} | {}{}",
            r.step, fmt::formatted_size("{}", r.total_steps), r.total_steps, r.epoch, r.loss,
            r.lr, r.grad_norm, throughput,
            r.mfu > 0.0 ? fmt::format(" | MFU {:.1f}%", 100.0 * r.mfu) : "");
  if (!r.figures.empty()) log::info("[Objective] {}", figure_list(r.figures));
  std::string health;
  if (r.hysteresis >= 0) health += fmt::format(", Hysteresis: {}", r.hysteresis);
  if (r.grad_underflow >= 0.0) {
    health += fmt::format(", Grad underflow: {:.3f}%", 100.0 * r.grad_underflow);
  }
  if (r.loss_scaling) {
    log::info("[AMP Stats] Scale: {:.1f}, Growth tracker: {}, Overflows: {}, Skipped steps: {}{}",
              r.scale, r.growth_tracker, r.overflows, r.skipped_steps, health);
  } else {
    log::info("[AMP Stats] Loss scaling: off, Non-finite steps: {}, Skipped steps: {}{}",
              r.overflows, r.skipped_steps, health);
  }
}

void ConsoleReporter::on_nonfinite(int64_t step, const std::string& what) {
  log::info("[AMP] Skipped step {}: {}", step, what);
}

void ConsoleReporter::on_end(const RunSummary& s) {
  set_status_line("");
  log::info("==================== ampt summary ====================");
  log::info("Precision:        {}", s.precision);
  log::info("Using GradScaler: {}", s.loss_scaling ? "yes" : "no");
  log::info("Initial Loss:     {:.4f}", s.initial_loss);
  if (s.steps_this_run > 0) {
    log::info("Final Loss:       {:.4f}", s.final_loss);
  } else {
    log::info("Final Loss:       - (no steps trained in this run)");
  }
  log::info("Skipped Steps:    {} of {}", s.skipped_steps, s.steps);
  if (s.loss_scaling) log::info("Loss Scale:       {:.1f} → {:.1f}", s.initial_scale, s.final_scale);
  if (s.final_val_loss >= 0.0) log::info("Final Val Loss:   {:.4f}", s.final_val_loss);
  for (const auto& [name, value] : s.final_figures) {
    if (name == "rewards/accuracies") log::info("Reward Accuracy:  {:.1f}%", 100.0 * value);
    if (name == "rewards/margins") log::info("Reward Margin:    {:.4f}", value);
  }
  // GRPO's mean reward and distillation's reverse KL, first logged step to last.
  for (const auto& [name, label] :
       {std::pair{"reward", "Mean Reward:     "}, {"distill/reverse_kl", "Reverse KL:      "}}) {
    for (const auto& [first_name, first] : s.initial_figures) {
      if (first_name != name) continue;
      for (const auto& [last_name, last] : s.final_figures) {
        if (last_name == name) log::info("{} {:.4f} → {:.4f}", label, first, last);
      }
    }
  }
  if (s.initial_val_loss >= 0.0 && s.final_val_loss >= 0.0 && language_model_ &&
      s.final_figures.empty()) {
    log::info("Val Perplexity:   {:.2f} pretrained → {:.2f} after {} steps", std::exp(s.initial_val_loss),
              std::exp(s.final_val_loss), s.steps);
  }
  if (s.steps_this_run > 0) {
    log::info("Throughput:       {} steady state (steps {}-{}, without evaluation and "
              "checkpoint pauses)",
              language_model_ ? fmt::format("{:.0f} tokens/s", s.tokens_per_sec)
                              : fmt::format("{:.0f} samples/s", s.samples_per_sec),
              s.steady_first_step, s.steady_last_step);
  }
  log::info("Wall Time:        {}: startup {}, training {} ({} steps), evaluation {}, "
            "checkpoint pauses {}",
            format_duration(s.seconds), format_duration(s.startup_seconds),
            format_duration(s.training_seconds), s.steps_this_run,
            format_duration(s.eval_seconds), format_duration(s.checkpoint_seconds));
  log::info("Peak Memory:      {} ({})", format_bytes(s.peak_memory_bytes), s.peak_memory_kind);
  if (!metrics_path_.empty()) log::info("Metrics:          {}", metrics_path_);
  const auto saved = s.checkpoint.empty()
                         ? std::string()
                         : fmt::format("{} ({} saved, {} written in {})", s.checkpoint,
                                       s.checkpoints_saved, format_bytes(s.checkpoint_bytes),
                                       format_duration(s.checkpoint_write_seconds));
  if (s.final_save_skipped) {
    log::info("Checkpoint:       none at the end (--save_final=false){}",
              saved.empty() ? "" : "; the last saved: " + saved);
  } else if (!saved.empty()) {
    log::info("Checkpoint:       {}", saved);
  }
}

}  // namespace ampt::log

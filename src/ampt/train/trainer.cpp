#include "ampt/train/trainer.h"

#include "ampt/core/errors.h"
#include "ampt/train/determinism.h"
#include "ampt/train/run.h"
#include "ampt/train/step_phase.h"
#include "ampt/train/step_profiler.h"
#include "ampt/train/step_report.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/cuda.h>

#include <algorithm>

namespace ampt::train {
namespace {

// Throughput over the logged intervals, with the time spent outside steps left out: each
// metrics line's figure, and the summary's steady state over all but the first interval.
class Throughput {
 public:
  Throughput(int64_t start_step, double samples_per_step)
      : samples_per_step_(samples_per_step), last_step_(start_step) {}

  // Samples per second since the previous logged step; `paused`: seconds evaluating and
  // checkpointing so far in the run.
  double log(int64_t step, double paused) {
    const auto now = Clock::now();
    const double samples = static_cast<double>(step - last_step_) * samples_per_step_;
    const double wall = std::chrono::duration<double>(now - last_time_).count();
    const double seconds = std::max(1e-9, wall - (paused - last_paused_));
    // The first interval (with the warm-up) counts only until a second one replaces it.
    if (++intervals_ <= 2) {
      samples_ = seconds_ = 0.0;
      first_step_ = last_step_ + 1;
    }
    samples_ += samples;
    seconds_ += seconds;
    last_step_ = step;
    last_time_ = now;
    last_paused_ = paused;
    return samples / seconds;
  }
  void summarize(log::RunSummary& summary, double tokens_per_sample) const {
    if (intervals_ == 0) return;
    summary.samples_per_sec = samples_ / seconds_;
    summary.tokens_per_sec = summary.samples_per_sec * tokens_per_sample;
    summary.steady_first_step = first_step_;
    summary.steady_last_step = last_step_;
  }

 private:
  double samples_per_step_;
  int64_t last_step_;
  Clock::time_point last_time_ = Clock::now();
  double last_paused_ = 0.0;
  int64_t intervals_ = 0;
  double samples_ = 0.0;
  double seconds_ = 0.0;
  int64_t first_step_ = 0;
};

}  // namespace

void Run::enter_stage(std::size_t index, int64_t step, int64_t epoch, bool announce) {
  const auto made = policy_.precision().enter_stage(index);
  peak_flops_ = device::peak_flops(device_.device, policy_.precision().policy().compute_dtype);
  state_->precision_changed();
  if (!announce) return;
  log::PrecisionSwitch change;
  change.step = step;
  change.epoch = epoch;
  change.from = made.from;
  change.to = made.to;
  change.stage = static_cast<int64_t>(index) + 1;
  change.stages = static_cast<int64_t>(policy_.precision().stages().size());
  change.stage_text = config::stage_text(policy_.precision().stages()[index]);
  change.loss_scaling = made.loss_scaling;
  change.init_scale = config_.grad_scaler_init;
  change.reason = made.reason;
  observer_.on_precision_switch(change);
}

void Run::report_bad_steps(bool wait, int64_t steps_done, log::RunSummary& summary) {
  for (const auto& bad : monitor_.poll(wait)) {
    if (bad.bad_targets > 0) stop_bad_targets(bad, steps_done, summary);
    observer_.on_nonfinite(bad.step, bad.what());
    if (monitor_.must_stop(bad)) stop_unstable(bad, steps_done, summary);
  }
}

// Saves what the run has (unless its weights are no longer finite: such a checkpoint would only
// displace good ones) and stops with the evidence and the next thing to try.
void Run::stop_unstable(const precision::BadStep& bad, int64_t steps_done, log::RunSummary& summary) {
  precision::RunFacts facts;
  facts.precision = policy_.precision().policy().name();
  facts.loss_scaling = policy_.precision().scaler().enabled();
  facts.dynamic_scale = policy_.precision().scaler().dynamic();
  facts.scale = policy_.precision().scaler().state().scale;
  facts.init_scale = config_.grad_scaler_init;
  facts.min_loss_scale = config_.min_loss_scale;
  facts.lr = config_.lr;
  facts.first_run_step = progress_.start_step + 1;
  facts.max_consecutive_skips = config_.max_consecutive_skips;
  const auto diagnosis = precision::diagnose(bad, facts);
  std::string saved = "no checkpoint saved: the weights are not finite";
  if (bad.weight_parameter.empty()) {
    try {
      save_checkpoint(steps_done, summary, /*final=*/true);
      saved = "saved " + summary.checkpoint;
    } catch (const RuntimeError& e) {
      saved = e.what();  // the diagnosis still comes first
    }
  }
  throw RuntimeError(fmt::format("training stopped after step {}: {} ({}). Next: {}", steps_done,
                                 diagnosis.problem, saved, diagnosis.next));
}

std::string Run::save_before_stopping(int64_t steps_done, log::RunSummary& summary) {
  try {
    save_checkpoint(steps_done, summary, /*final=*/true);
    return "saved " + summary.checkpoint;
  } catch (const RuntimeError& e) {
    return e.what();  // the reason for stopping still comes first
  }
}

void Run::stop_bad_targets(const precision::BadStep& bad, int64_t steps_done,
                           log::RunSummary& summary) {
  const std::string saved = save_before_stopping(steps_done, summary);
  throw RuntimeError(fmt::format(
      "training stopped after step {}: step {} met bad data: {} ({})", steps_done, bad.step,
      target_check_.error(bad.bad_targets, bad.target_position, bad.target_value), saved));
}

log::RunSummary Run::run(Clock::time_point started) {
  observer_.on_start(describe());
  log::RunSummary summary;
  summary.precision = policy_.precision().policy().name();
  summary.loss_scaling = policy_.precision().scaler().enabled();
  summary.initial_scale = policy_.precision().scaler().state().scale;
  summary.initial_loss = progress_.initial_loss;
  const int64_t samples_per_step =
      progress_.batch_size * progress_.grad_accum_steps * dist_.world_size();
  const auto start = Clock::now();
  summary.startup_seconds = std::chrono::duration<double>(start - started).count();
  Throughput throughput(progress_.start_step, static_cast<double>(samples_per_step));
  const auto timed_evaluation = [this](int64_t at) {
    if (device_.device.is_cuda()) torch::cuda::synchronize();  // queued steps are training's time
    const auto begun = Clock::now();
    auto report = evaluate(at);
    progress_.eval_seconds += seconds_since(begun);
    return report;
  };
  int64_t step = progress_.start_step;
  StepProfiler profiler(config::parse_step_range(config_.profile), config_.output_dir,
                        device_.device, dist_.rank(), policy_.model().module->parameters());
  profiler_ = &profiler;
  const auto report_profile = [this](const std::optional<ProfileFiles>& files) {
    if (files) {
      observer_.on_profile(files->steps.first, files->steps.last, files->trace, files->table,
                           files->census);
    }
  };

  // Fine-tuning's yardstick: the pretrained weights' validation loss, before they change.
  if (!config_.init_from.empty() && progress_.start_step == 0) {
    const auto eval = timed_evaluation(0);
    if (eval.batches > 0) summary.initial_val_loss = eval.loss;
  }

  for (; step < progress_.total_steps; ++step) {
    profiler.before_step(step + 1);
    const int64_t epoch = progress_.batches->state().epoch;
    if (const auto stage = policy_.precision().stage_at(step, epoch);
        stage != policy_.precision().stage()) {
      enter_stage(stage, step, epoch, /*announce=*/true);
    }
    const double lr = progress_.schedule.at(step);
    const int stop = dist_.agree_stop(context_.stop_requested());
    const bool log_step = step == 0 || (step + 1) % config_.log_every == 0 ||
                          step + 1 == progress_.total_steps || stop != 0;
    std::vector<data::Batch> micro_batches;
    StepPhase data_wait("ampt::data_wait");
    if (samples()) {
      try {
        micro_batches = rollout_batches(step);
      } catch (const RuntimeError& e) {
        // A reward that cannot score (its program crashed, hung or answered garbage) stops the
        // run with what it has trained saved.
        const std::string saved = save_before_stopping(step, summary);
        throw RuntimeError(fmt::format("training stopped after step {}: {} ({})", step, e.what(), saved));
      }
    } else {
      for (int64_t micro = 0; micro < progress_.grad_accum_steps; ++micro) {
        micro_batches.push_back(progress_.batches->next());
      }
    }
    data_wait.end();
    const auto result = step_->run(micro_batches, lr, log_step);
    monitor_.record(step + 1, /*flush=*/log_step);
    report_bad_steps(/*wait=*/false, step + 1, summary);
    checkpointer_.collect(/*wait=*/false, /*final=*/false, summary);
    observer_.on_progress(step + 1, progress_.total_steps, seconds_since(start));

    if (log_step) {
      StepFacts facts;
      facts.step = step + 1;
      facts.total_steps = progress_.total_steps;
      facts.epoch = progress_.batches->state().epoch;
      facts.lr = lr;
      facts.tokens_per_sample = policy_.model().tokens_per_sample * rows_per_sample();
      facts.flops_per_sample = policy_.model().flops_per_sample * rows_per_sample();
      facts.figure_names = &step_->objective().figure_names();
      facts.peak_flops = peak_flops_;
      facts.hysteresis = config_.grad_scaler_rules == config::ScalerRules::deepspeed;
      const auto report = step_report(
          result, facts,
          [&] { return throughput.log(step + 1, progress_.eval_seconds + checkpointer_.pause_seconds()); },
          policy_.precision().scaler(), progress_.overflow_steps, dist_, device_.device);
      observer_.on_step(report);
      if (step == 0) progress_.initial_loss = summary.initial_loss = report.loss;
      summary.final_loss = report.loss;
      if (summary.initial_figures.empty()) summary.initial_figures = report.figures;
      summary.final_figures = report.figures;
    }
    if (const auto census = profiler.take_census(step + 1)) observer_.on_census(census->counts);
    report_profile(profiler.after_step(step + 1));

    if (stop != 0) {
      summary.stop_signal = stop;
      ++step;
      break;
    }
    const bool last = step + 1 == progress_.total_steps;
    if (config_.eval_every > 0 && (step + 1) % config_.eval_every == 0 && !last) {
      timed_evaluation(step + 1);
    }
    if (config_.save_every > 0 && (step + 1) % config_.save_every == 0 && !last) {
      save_checkpoint(step + 1, summary, /*final=*/false);
    }
  }
  report_profile(profiler.finish(step));
  profiler_ = nullptr;
  // The last steps' records may still be on their way: every bad step gets reported.
  report_bad_steps(/*wait=*/true, step, summary);
  // A preempted run saves and leaves at once; a finished one is evaluated.
  if (summary.stop_signal == 0 && step > progress_.start_step) {
    const auto eval = timed_evaluation(step);
    if (eval.batches > 0) summary.final_val_loss = eval.loss;
  }
  // At the end unless --save_final=false, and on a stop request always: the checkpoint a
  // requeued job resumes from.
  if (step > progress_.start_step) {
    if (config_.save_final || summary.stop_signal != 0) {
      save_checkpoint(step, summary, /*final=*/true);
    } else {
      // The last save_every checkpoint may still be writing: it is the run's checkpoint.
      checkpointer_.collect(/*wait=*/true, /*final=*/false, summary);
      summary.final_save_skipped = true;
    }
  }
  dist_.finish();

  const auto final_state = policy_.precision().scaler().state();
  if (policy_.precision().used().size() > 1) {
    summary.precision = fmt::format("{}", fmt::join(policy_.precision().used(), " → "));
    summary.loss_scaling = summary.loss_scaling || policy_.precision().policy().loss_scaling;
  }
  summary.steps = step;
  summary.steps_this_run = step - progress_.start_step;
  summary.skipped_steps = static_cast<int64_t>(progress_.overflow_steps.item<double>());
  summary.final_scale = final_state.scale;
  throughput.summarize(
      summary, static_cast<double>(policy_.model().tokens_per_sample * rows_per_sample()));
  summary.seconds = seconds_since(started);
  summary.eval_seconds = progress_.eval_seconds;
  summary.checkpoint_seconds = checkpointer_.pause_seconds();
  summary.training_seconds =
      summary.seconds - summary.startup_seconds - summary.eval_seconds - summary.checkpoint_seconds;
  summary.peak_memory_bytes = device::peak_memory_bytes(device_.device, summary.peak_memory_kind);
  observer_.on_end(summary);
  return summary;
}

log::RunSummary run_training(const config::Config& config, const RunContext& context,
                        log::Observer& observer) {
  const auto started = Clock::now();
  apply_determinism(config.deterministic, config.seed);
  return Run(config, context, observer).run(started);
}

}  // namespace ampt::train

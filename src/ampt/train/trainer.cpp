#include "ampt/train/trainer.h"

#include "ampt/checkpoint/checkpoint.h"
#include "ampt/config/enum_names.h"
#include "ampt/config/precision_schedule.h"
#include "ampt/core/errors.h"
#include "ampt/core/version.h"
#include "ampt/data/loader.h"
#include "ampt/data/registry.h"
#include "ampt/dist/data_parallel.h"
#include "ampt/models/precision_islands.h"
#include "ampt/models/registry.h"
#include "ampt/precision/autocast_guard.h"
#include "ampt/precision/choice.h"
#include "ampt/precision/compat_report.h"
#include "ampt/precision/loss_scaler.h"
#include "ampt/precision/master_weights.h"
#include "ampt/precision/policy.h"
#include "ampt/precision/stability_monitor.h"
#include "ampt/train/determinism.h"
#include "ampt/train/device.h"
#include "ampt/train/optimizer.h"
#include "ampt/train/schedule.h"
#include "ampt/train/step.h"
#include "ampt/train/tuning.h"

#include <ATen/Context.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/nn/functional/loss.h>

#include <chrono>
#include <cmath>
#include <optional>

namespace ampt::train {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Which checkpoint config.resume names: none, output_dir's latest, or a path.
std::optional<std::string> checkpoint_to_resume(const config::Config& config, std::string& note) {
  if (config.resume.empty()) return std::nullopt;
  if (config.resume != "auto") return config.resume;
  auto latest = checkpoint::find_latest(config.output_dir);
  if (!latest) note = "no checkpoint in " + config.output_dir + ": starting fresh";
  return latest;
}

// Everything one run holds, built once; the loop in run() is the training step.
class Run {
 public:
  Run(const config::Config& config, const RunContext& context, Observer& observer)
      : config_(config),
        context_(context),
        observer_(observer),
        device_(dist::place_on_local_gpu(select_device(config.device), config.launch)),
        dist_(config, device_.device),
        splits_(data::open_dataset(config)),
        model_(make_model(config, splits_.spec, device_.device)),
        parameters_(model_.module->parameters()),
        stages_(config::precision_stages(config)),
        choice_(precision::choose_precision(stages_.front().precision, config.strict_precision,
                                            device_.device)),
        policy_(precision::make_policy(choice_.precision, config.amp_opt_level)),
        scaler_(precision::scaler_options(config, policy_.loss_scaling), device_.device),
        monitor_(make_monitor(config, *model_.module, device_.device)),
        islands_(models::select_islands(*model_.module,
                                        config::split_module_patterns(config.keep_fp32_modules),
                                        config.amp_opt_level == config::OptLevel::O2)),
        masters_(*model_.module, config.amp_opt_level == config::OptLevel::O2,
                 [this](const std::string& name) { return islands_.owns_parameter(name); }),
        optimizer_(make_optimizer(config, masters_.masters())),
        overflow_steps_(torch::zeros({}, torch::dtype(torch::kFloat32).device(device_.device))) {
    masters_.set_dtype(policy_.weight_dtype);
    precisions_used_.push_back(policy_.name());
    // Resume before the loader exists: the checkpoint says where the data continues.
    std::string note;
    data::LoaderState data_start;
    if (const auto path = checkpoint_to_resume(config, note)) data_start = restore(*path, note);
    dist_.attach(model_tensors(), parameters_);
    masters_.refresh_model();  // O2: rank 0's masters, broadcast, become every rank's half weights
    batches_.emplace(splits_.train, data::train_loader_options(config, device_.device), data_start);
    steps_per_epoch_ = batches_->batches_per_epoch() / config.grad_accum_steps;
    if (steps_per_epoch_ == 0) {
      throw RuntimeError(fmt::format(
          "an epoch has {} batches of {}, fewer than grad_accum_steps {}: lower grad_accum_steps "
          "or batch_size",
          batches_->batches_per_epoch(), config.batch_size, config.grad_accum_steps));
    }
    total_steps_ = config.max_steps > 0 ? config.max_steps : config.epochs * steps_per_epoch_;
    if (start_step_ >= total_steps_ && start_step_ > 0) {
      note += fmt::format("; it is at or past the last step ({}): nothing to train, raise "
                          "--max_steps or --epochs to train on",
                          total_steps_);
    }
    schedule_ = {config.lr, config.lr * config.min_lr_ratio, config.warmup_steps, total_steps_};
    resume_note_ = note;
    set_up_speed_features();
    peak_flops_ = peak_flops(device_.device, policy_.compute_dtype);
    if (splits_.val && splits_.val->size() < config.batch_size) {
      throw RuntimeError(fmt::format(
          "the validation split of {} has {} samples, fewer than one batch of batch_size {}; "
          "lower batch_size or raise val_fraction",
          config.dataset, splits_.val->size(), config.batch_size));
    }
  }

  RunSummary run();

 private:
  static models::Model make_model(const config::Config& config, const data::DataSpec& spec,
                                  const c10::Device& device) {
    torch::manual_seed(config.seed);
    auto model = models::make_model(config, spec);
    model.module->to(device);
    model.module->train();
    if (channels_last_applies(config, device)) to_channels_last(model);
    return model;
  }

  static precision::StabilityMonitor make_monitor(const config::Config& config,
                                                 const torch::nn::Module& module,
                                                 const c10::Device& device) {
    std::vector<torch::Tensor> params;
    std::vector<std::string> names;
    for (const auto& item : module.named_parameters()) {
      names.push_back(item.key());
      params.push_back(item.value());
    }
    return {std::move(params), std::move(names), device, config.max_consecutive_skips};
  }

  void set_up_speed_features();

  data::LoaderState restore(const std::string& path, std::string& note);
  // Where the data continues, carried over to this run's batch shape.
  data::LoaderState resume_position(const checkpoint::Checkpoint& saved, std::string& note) const;
  void report_bad_steps(bool wait, int64_t steps_done, RunSummary& summary);
  [[noreturn]] void stop_unstable(const precision::BadStep& bad, int64_t steps_done,
                                  RunSummary& summary);
  // Parameters (the fp32 masters under O2) and buffers: what a checkpoint holds of the model.
  NamedTensors model_tensors() const;
  // Switches to precision stage `index`: policy, loss scaler (fresh at init_scale when fp16
  // starts, gone when it ends) and the dtype of O2's half weights, re-cast from the masters.
  void enter_stage(std::size_t index, int64_t step, int64_t epoch, bool announce);
  RunInfo describe() const;
  torch::Tensor loss_of(const data::Batch& batch, torch::Tensor* correct);
  EvalReport evaluate(int64_t step);
  void save_checkpoint(int64_t steps_done, RunSummary& summary);

  const config::Config& config_;
  const RunContext& context_;
  Observer& observer_;
  DeviceChoice device_;
  dist::DataParallel dist_;
  data::DataSplits splits_;
  models::Model model_;
  std::vector<torch::Tensor> parameters_;
  std::vector<config::PrecisionStage> stages_;
  std::size_t stage_ = 0;
  precision::PrecisionChoice choice_;
  precision::PrecisionPolicy policy_;
  precision::LossScaler scaler_;
  precision::StabilityMonitor monitor_;
  models::PrecisionIslands islands_;
  precision::MasterWeights masters_;
  std::vector<std::string> precisions_used_;  // "FP32", "BF16": each stage's, in order
  std::unique_ptr<Optimizer> optimizer_;
  torch::Tensor overflow_steps_;  // counted on the device: a skipped step costs no sync
  std::optional<data::Loader> batches_;
  int64_t steps_per_epoch_ = 0;
  int64_t total_steps_ = 0;
  LrSchedule schedule_;
  double peak_flops_ = 0.0;
  int64_t start_step_ = 0;
  double initial_loss_ = 0.0;
  std::string resume_note_;
  std::vector<std::string> speed_notes_;
  std::unique_ptr<TrainStep> step_;
};

void Run::set_up_speed_features() {
  if (policy_.fp8) model_.use_fp8(precision::fp8_recipe(config_));
  if (auto note = apply_tf32(config_.allow_tf32, device_.device); !note.empty()) {
    speed_notes_.push_back(std::move(note));
  }
  if (channels_last_applies(config_, device_.device)) {
    speed_notes_.emplace_back("Channels-last: the CNN's weights and activations in NHWC");
  }
  const auto obstacle =
      dist_.active() ? std::string("a distributed step waits for the other ranks on the host")
                     : cuda_graph_obstacle(device_.device, config_.grad_ckpt, config_.dropout);
  // O2 allocates its fp32 gradients per step and a schedule changes dtypes: both stay eager.
  const bool eager_precision = masters_.enabled() || stages_.size() > 1;
  const bool graphed = config_.cuda_graphs && obstacle.empty() && !eager_precision;
  if (graphed) {
    speed_notes_.push_back(fmt::format("CUDA graphs: the step is captured after {} warm-up steps "
                                       "and replayed",
                                       TrainStep::kWarmupSteps));
  } else if (config_.cuda_graphs) {
    speed_notes_.push_back(
        "CUDA graphs: off, " +
        (obstacle.empty() ? std::string("O2 master weights and precision schedules run eagerly")
                          : obstacle) +
        "; the step runs eagerly");
  }
  StepParts parts;
  parts.loss = [this](const data::Batch& batch) { return loss_of(batch, nullptr); };
  parts.parameters = parameters_;
  parts.scaler = &scaler_;
  parts.masters = &masters_;
  parts.optimizer = optimizer_.get();
  parts.max_grad_norm = config_.max_grad_norm;
  parts.overflow_steps = overflow_steps_;
  parts.monitor = &monitor_;
  // Underflow is measured against the dtype autocast computes in (fp8 runs report bf16's).
  if (policy_.compute_dtype == torch::kHalf || policy_.compute_dtype == torch::kBFloat16) {
    parts.underflow_dtype = policy_.compute_dtype;
  }
  if (dist_.active()) {
    parts.before_backward = [this](bool last) { dist_.before_backward(last); };
    parts.after_backward = [this] { dist_.after_backward(); };
    parts.agree_found_inf = [this](torch::Tensor& found_inf) { dist_.agree_found_inf(found_inf); };
  }
  step_ = std::make_unique<TrainStep>(std::move(parts), graphed);
}

data::LoaderState Run::restore(const std::string& path, std::string& note) {
  const auto saved = checkpoint::load(path);
  if (saved.optimizer_kind != optimizer_->kind()) {
    throw RuntimeError(fmt::format("checkpoint '{}' was saved with optimizer {}, this run uses {}",
                                   path, saved.optimizer_kind, optimizer_->kind()));
  }
  // Check everything before changing anything, so a bad checkpoint leaves no half-restored run.
  checkpoint::copy_into(saved.model, model_tensors(), "model", path);
  checkpoint::copy_into(saved.optimizer, optimizer_->state(), "optimizer", path);
  std::string stage_note;
  if (const auto stage = config::stage_at(stages_, saved.step, saved.data_epoch); stage != stage_) {
    enter_stage(stage, saved.step, saved.data_epoch, /*announce=*/false);
    precisions_used_ = {policy_.name()};
    stage_note = fmt::format(", precision stage {} of {} ({})", stage + 1, stages_.size(),
                             config::stage_text(stages_[stage]));
  }
  masters_.refresh_model();

  std::string scaler_note;
  if (saved.scaler && scaler_.enabled()) {
    scaler_.load_state(*saved.scaler);
    scaler_note = fmt::format("loss scaler (scale {}, growth tracker {})", saved.scaler->scale,
                              saved.scaler->growth_tracker);
  } else if (saved.scaler) {
    scaler_note = "loss scaler state ignored: this run has no loss scaler";
  } else if (scaler_.enabled()) {
    scaler_note = fmt::format("loss scaler starts at init_scale {}: the checkpoint's run had none",
                              config_.grad_scaler_init);
  }
  // A Generator is a handle: this copy sets the state of the process-wide default generator.
  auto cpu_generator = at::globalContext().defaultGenerator(c10::Device(c10::kCPU));
  cpu_generator.set_state(saved.cpu_rng);
  if (saved.cuda_rng.defined() && device_.device.is_cuda()) {
    auto cuda_generator = at::globalContext().defaultGenerator(device_.device);
    cuda_generator.set_state(saved.cuda_rng);
  }
  overflow_steps_.fill_(static_cast<double>(saved.skipped_steps));
  start_step_ = saved.step;
  initial_loss_ = saved.initial_loss;
  note = fmt::format("Resumed from {} at step {} (epoch {}, batch {}): model, {} optimizer state, "
                     "RNG{}{}",
                     path, saved.step, saved.data_epoch, saved.data_position,
                     saved.optimizer_kind, scaler_note.empty() ? "" : ", " + scaler_note,
                     stage_note);
  return resume_position(saved, note);
}

data::LoaderState Run::resume_position(const checkpoint::Checkpoint& saved, std::string& note) const {
  const data::LoaderState state{saved.data_epoch, saved.data_position};
  const int64_t batch_samples = config_.batch_size * dist_.world_size();
  const int64_t saved_batch_samples = saved.batch_size * saved.world_size;
  if (saved_batch_samples == 0 || saved_batch_samples == batch_samples) return state;
  // Other ranks or another batch_size: a position counts other batches, the samples stay.
  const auto moved =
      data::rebatch(state, saved_batch_samples, batch_samples, splits_.train->size());
  note += fmt::format("; its batches held {} samples ({} ranks x batch_size {}), this run's {} ({} "
                      "x {}): ",
                      saved_batch_samples, saved.world_size, saved.batch_size, batch_samples,
                      dist_.world_size(), config_.batch_size);
  const int64_t from = moved.state.position * batch_samples;
  if (moved.state.epoch != saved.data_epoch) {
    note += fmt::format("the data continues at epoch {} (the checkpoint stopped at sample {} of "
                        "epoch {}, less than a batch before its end)",
                        moved.state.epoch, moved.sample, saved.data_epoch);
  } else if (moved.samples_read_again > 0) {
    note += fmt::format("the data continues at sample {} of epoch {} (the checkpoint stopped at "
                        "{}; rounded down to a whole batch, {} samples are read again)",
                        from, moved.state.epoch, moved.sample, moved.samples_read_again);
  } else {
    note += fmt::format("the data continues at sample {} of epoch {}", from, moved.state.epoch);
  }
  return moved.state;
}

NamedTensors Run::model_tensors() const {
  auto out = masters_.masters();
  for (const auto& item : model_.module->named_buffers()) out.emplace_back(item.key(), item.value());
  return out;
}

void Run::enter_stage(std::size_t index, int64_t step, int64_t epoch, bool announce) {
  PrecisionSwitch change;
  change.step = step;
  change.epoch = epoch;
  change.from = policy_.name();
  stage_ = index;
  choice_ = precision::choose_precision(stages_[index].precision, config_.strict_precision,
                                        device_.device);
  policy_ = precision::make_policy(choice_.precision, config_.amp_opt_level);
  if (policy_.loss_scaling != scaler_.enabled()) {
    scaler_ = precision::LossScaler(precision::scaler_options(config_, policy_.loss_scaling), device_.device);
  }
  masters_.set_dtype(policy_.weight_dtype);
  peak_flops_ = peak_flops(device_.device, policy_.compute_dtype);
  if (!announce) return;
  precisions_used_.push_back(policy_.name());
  change.to = policy_.name();
  change.stage = static_cast<int64_t>(index) + 1;
  change.stages = static_cast<int64_t>(stages_.size());
  change.stage_text = config::stage_text(stages_[index]);
  change.loss_scaling = policy_.loss_scaling;
  change.init_scale = config_.grad_scaler_init;
  change.reason = choice_.reason;
  observer_.on_precision_switch(change);
}

void Run::save_checkpoint(int64_t steps_done, RunSummary& summary) {
  if (!dist_.is_main()) return;  // identical on every rank: rank 0 writes it
  checkpoint::Checkpoint c;
  c.ampt_version = kVersion;
  c.git_revision = kGitRevision;
  c.config = context_.config_text;
  c.step = steps_done;
  c.data_epoch = batches_->state().epoch;
  c.data_position = batches_->state().position;
  c.batch_size = config_.batch_size;
  c.world_size = dist_.world_size();
  c.skipped_steps = static_cast<int64_t>(overflow_steps_.item<double>());
  c.initial_loss = initial_loss_;
  c.model = model_tensors();
  c.optimizer_kind = optimizer_->kind();
  c.optimizer = optimizer_->state();
  if (scaler_.enabled()) c.scaler = scaler_.state();
  c.cpu_rng = at::globalContext().defaultGenerator(c10::Device(c10::kCPU)).get_state();
  if (device_.device.is_cuda()) {
    c.cuda_rng = at::globalContext().defaultGenerator(device_.device).get_state();
  }
  summary.checkpoint = checkpoint::save(config_.output_dir, c, config_.keep_checkpoints);
  observer_.on_checkpoint(summary.checkpoint, steps_done);
}

torch::Tensor Run::loss_of(const data::Batch& batch, torch::Tensor* correct) {
  precision::AutocastGuard autocast(device_.device.type(), policy_.compute_dtype, policy_.autocast,
                                    config_.autocast_cache);
  models::IslandScope islands(&islands_);
  // A language model's [B, T, vocab] logits are scored per token, a classifier's per sample.
  const auto logits = model_.forward(batch.inputs).flatten(0, -2);
  const auto targets = batch.targets.flatten();
  if (correct != nullptr) *correct = (logits.argmax(-1) == targets).sum();
  return torch::nn::functional::cross_entropy(logits, targets);
}

EvalReport Run::evaluate(int64_t step) {
  EvalReport report;
  report.step = step;
  if (!splits_.val) return report;
  data::Loader val(splits_.val,
                   data::val_loader_options(config_, device_.device, splits_.val->size()));
  report.batches = config_.eval_batches > 0
                       ? std::min(config_.eval_batches, val.batches_per_epoch())
                       : val.batches_per_epoch();
  torch::NoGradGuard no_grad;
  dist_.share_buffers(model_.module->buffers());
  model_.module->eval();
  auto loss_sum = torch::zeros({}, torch::dtype(torch::kFloat64).device(device_.device));
  auto correct_sum = torch::zeros({}, torch::dtype(torch::kInt64).device(device_.device));
  int64_t targets = 0;
  for (int64_t b = 0; b < report.batches; ++b) {
    const auto batch = val.next();
    torch::Tensor correct;
    loss_sum.add_(loss_of(batch, &correct));
    correct_sum.add_(correct);
    targets += batch.targets.numel();
  }
  model_.module->train();
  // Every batch has batch_size samples (the loader drops a short last one) and every rank as
  // many batches: plain means, over batches and then over ranks.
  report.loss = dist_.mean(loss_sum).item<double>() / static_cast<double>(report.batches);
  if (splits_.spec.task == data::Task::language_model) {
    report.perplexity = std::exp(report.loss);
  } else {
    report.accuracy = dist_.mean(correct_sum).item<double>() / static_cast<double>(targets);
  }
  observer_.on_eval(report);
  return report;
}

RunInfo Run::describe() const {
  RunInfo info;
  info.device = device_description(device_.device);
  info.device_reason = device_.reason;
  info.model = config_.model;
  info.architecture = model_.architecture;
  info.parameters = models::parameter_count(*model_.module);
  info.dataset = config_.dataset;
  info.data_description = splits_.description;
  info.language_model = splits_.spec.task == data::Task::language_model;
  info.peak_flops = peak_flops_;
  info.precision = policy_.name();
  info.precision_source = context_.precision_source;
  info.precision_reason = choice_.reason;
  info.precision_fell_back = choice_.fell_back;
  info.precision_explanation = policy_.explanation();
  info.opt_level = std::string(config::to_string(config_.amp_opt_level));
  if (stages_.size() > 1) {
    for (const auto& stage : stages_) info.precision_schedule.push_back(config::stage_text(stage));
    info.precision_stage = static_cast<int64_t>(stage_) + 1;
  }
  std::vector<precision::PrecisionPolicy> policies;
  for (const auto& stage : stages_) {
    policies.push_back(precision::make_policy(
        precision::choose_precision(stage.precision, false, device_.device).precision,
        config_.amp_opt_level));
  }
  if (precision::wants_compat_report(policies)) {
    // The riskiest stage speaks for the schedule: fp16 if there is one, else the first half one.
    auto riskiest = std::ranges::find_if(policies, [](const auto& p) { return p.loss_scaling; });
    if (riskiest == policies.end()) {
      riskiest = std::ranges::find_if(policies, [](const auto& p) { return p.autocast; });
    }
    info.compat_report = precision::compat_report(*model_.module, islands_, *riskiest);
  }
  info.loss_scaling = scaler_.enabled();
  info.init_scale = config_.grad_scaler_init;
  info.growth_factor = config_.grad_scaler_growth_factor;
  info.backoff_factor = config_.grad_scaler_backoff;
  info.growth_interval = config_.grad_scaler_growth_interval;
  info.scaler_rules = config::to_string(config_.grad_scaler_rules);
  info.static_scale = config_.loss_scale;
  info.hysteresis = config_.hysteresis;
  info.consecutive_hysteresis = config_.consecutive_hysteresis;
  info.min_loss_scale = config_.min_loss_scale;
  info.max_loss_scale = config_.max_loss_scale;
  info.max_consecutive_skips = config_.max_consecutive_skips;
  info.deterministic = config_.deterministic;
  info.autocast_cache = config_.autocast_cache;
  info.seed = config_.seed;
  info.optimizer = optimizer_->describe();
  info.batch_size = config_.batch_size;
  info.grad_accum_steps = config_.grad_accum_steps;
  info.total_steps = total_steps_;
  info.steps_per_epoch = steps_per_epoch_;
  info.peak_lr = schedule_.peak_lr;
  info.min_lr = schedule_.min_lr;
  info.warmup_steps = config_.warmup_steps;
  info.max_grad_norm = config_.max_grad_norm;
  info.start_step = start_step_;
  info.resume_note = resume_note_;
  if (dist_.active()) {
    info.distributed = fmt::format(
        "{}; global batch {} = {} ranks x {} x {} accumulation", dist_.describe(),
        dist_.world_size() * config_.batch_size * config_.grad_accum_steps, dist_.world_size(),
        config_.batch_size, config_.grad_accum_steps);
  }
  info.speed_notes = speed_notes_;
  return info;
}

void Run::report_bad_steps(bool wait, int64_t steps_done, RunSummary& summary) {
  for (const auto& bad : monitor_.poll(wait)) {
    observer_.on_nonfinite(bad.step, bad.what());
    if (monitor_.must_stop(bad)) stop_unstable(bad, steps_done, summary);
  }
}

// Saves what the run has (unless its weights are no longer finite: such a checkpoint would only
// displace good ones) and stops with the evidence and the next thing to try.
void Run::stop_unstable(const precision::BadStep& bad, int64_t steps_done, RunSummary& summary) {
  precision::RunFacts facts;
  facts.precision = policy_.name();
  facts.loss_scaling = scaler_.enabled();
  facts.dynamic_scale = scaler_.dynamic();
  facts.scale = scaler_.state().scale;
  facts.init_scale = config_.grad_scaler_init;
  facts.min_loss_scale = config_.min_loss_scale;
  facts.lr = config_.lr;
  facts.first_run_step = start_step_ + 1;
  facts.max_consecutive_skips = config_.max_consecutive_skips;
  const auto diagnosis = precision::diagnose(bad, facts);
  std::string saved = "no checkpoint saved: the weights are not finite";
  if (bad.weight_parameter.empty()) {
    save_checkpoint(steps_done, summary);
    saved = "saved " + summary.checkpoint;
  }
  throw RuntimeError(fmt::format("training stopped after step {}: {} ({}). Next: {}", steps_done,
                                 diagnosis.problem, saved, diagnosis.next));
}

RunSummary Run::run() {
  observer_.on_start(describe());
  RunSummary summary;
  summary.precision = policy_.name();
  summary.loss_scaling = scaler_.enabled();
  summary.initial_scale = scaler_.state().scale;
  summary.initial_loss = initial_loss_;
  const int64_t samples_per_step =
      config_.batch_size * config_.grad_accum_steps * dist_.world_size();
  const auto start = Clock::now();
  auto last_log = start;
  int64_t last_log_step = start_step_;
  int64_t step = start_step_;

  for (; step < total_steps_; ++step) {
    const int64_t epoch = batches_->state().epoch;
    if (const auto stage = config::stage_at(stages_, step, epoch); stage != stage_) {
      enter_stage(stage, step, epoch, /*announce=*/true);
    }
    const double lr = schedule_.at(step);
    const int stop = dist_.agree_stop(context_.stop_requested());
    const bool log_step = step == 0 || (step + 1) % config_.log_every == 0 ||
                          step + 1 == total_steps_ || stop != 0;
    std::vector<data::Batch> micro_batches;
    for (int64_t micro = 0; micro < config_.grad_accum_steps; ++micro) {
      micro_batches.push_back(batches_->next());
    }
    const auto result = step_->run(micro_batches, lr, log_step);
    monitor_.record(step + 1);
    report_bad_steps(/*wait=*/false, step + 1, summary);
    observer_.on_progress(step + 1, total_steps_, seconds_since(start));

    if (log_step) {
      StepReport report;
      report.step = step + 1;
      report.total_steps = total_steps_;
      report.epoch = batches_->state().epoch;
      report.loss = dist_.mean(result.loss_sum).item<double>() /
                    static_cast<double>(config_.grad_accum_steps);
      report.lr = lr;
      report.grad_norm = result.grad_norm.item<double>();
      const auto now = Clock::now();
      report.samples_per_sec =
          static_cast<double>((step + 1 - last_log_step) * samples_per_step) /
          std::max(1e-9, std::chrono::duration<double>(now - last_log).count());
      report.tokens_per_sec = report.samples_per_sec * static_cast<double>(model_.tokens_per_sample);
      if (peak_flops_ > 0.0) {
        report.mfu = report.samples_per_sec * static_cast<double>(model_.flops_per_sample) / peak_flops_;
      }
      last_log = now;
      last_log_step = step + 1;
      const auto scaler_state = scaler_.state();
      report.loss_scaling = scaler_.enabled();
      report.scale = scaler_state.scale;
      report.growth_tracker = scaler_state.growth_tracker;
      report.overflows = static_cast<int64_t>(overflow_steps_.item<double>());
      report.skipped_steps = report.overflows;
      if (scaler_.enabled() && config_.grad_scaler_rules == config::ScalerRules::deepspeed) {
        report.hysteresis = scaler_state.hysteresis;
      }
      if (result.underflow.defined()) {
        const auto counts = result.underflow.cpu();
        const double nonzero = counts[1].item<double>();
        report.grad_underflow = nonzero > 0.0 ? counts[0].item<double>() / nonzero : 0.0;
      }
      observer_.on_step(report);
      if (step == 0) initial_loss_ = summary.initial_loss = report.loss;
      summary.final_loss = report.loss;
    }

    if (stop != 0) {
      summary.stop_signal = stop;
      ++step;
      break;
    }
    const bool last = step + 1 == total_steps_;
    if (config_.eval_every > 0 && (step + 1) % config_.eval_every == 0 && !last) evaluate(step + 1);
    if (config_.save_every > 0 && (step + 1) % config_.save_every == 0 && !last) {
      save_checkpoint(step + 1, summary);
    }
  }
  // The last steps' records may still be on their way: every bad step gets reported.
  report_bad_steps(/*wait=*/true, step, summary);
  // A preempted run saves and leaves at once; a finished one is evaluated.
  if (summary.stop_signal == 0 && step > start_step_) {
    const auto eval = evaluate(step);
    if (eval.batches > 0) summary.final_val_loss = eval.loss;
  }
  // At the end, and on a stop request: the checkpoint a requeued job resumes from.
  if (step > start_step_) save_checkpoint(step, summary);
  dist_.finish();

  const auto final_state = scaler_.state();
  if (precisions_used_.size() > 1) {
    summary.precision = fmt::format("{}", fmt::join(precisions_used_, " → "));
    summary.loss_scaling = summary.loss_scaling || policy_.loss_scaling;
  }
  summary.steps = step;
  summary.steps_this_run = step - start_step_;
  summary.skipped_steps = static_cast<int64_t>(overflow_steps_.item<double>());
  summary.final_scale = final_state.scale;
  summary.seconds = seconds_since(start);
  summary.samples_per_sec = static_cast<double>((step - start_step_) * samples_per_step) /
                            std::max(1e-9, summary.seconds);
  summary.tokens_per_sec = summary.samples_per_sec * static_cast<double>(model_.tokens_per_sample);
  summary.peak_memory_bytes = peak_memory_bytes(device_.device, summary.peak_memory_kind);
  observer_.on_end(summary);
  return summary;
}

}  // namespace

RunSummary run_training(const config::Config& config, const RunContext& context,
                        Observer& observer) {
  apply_determinism(config.deterministic, config.seed);
  return Run(config, context, observer).run();
}

}  // namespace ampt::train

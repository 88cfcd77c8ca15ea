#include "ampt/train/run.h"
#include "ampt/train/reference_cache.h"

#include "ampt/config/enum_names.h"
#include "ampt/core/errors.h"
#include "ampt/kernels/kernel_support.h"
#include "ampt/models/model_family.h"
#include "ampt/precision/fp8_gemm_timer.h"
#include "ampt/models/linear.h"
#include "ampt/plan/memory_plan.h"
#include "ampt/train/block_gather.h"
#include "ampt/train/fused_choice.h"
#include "ampt/train/pretrained.h"
#include "ampt/models/compat_report.h"
#include "ampt/train/tuning.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/autograd.h>

#include <algorithm>
#include <chrono>

namespace ampt::train {
namespace {

// Which checkpoint config.resume names: none, output_dir's latest, or a path.
std::optional<std::string> checkpoint_to_resume(const config::Config& config, std::string& note) {
  if (config.resume.empty()) return std::nullopt;
  if (config.resume != "auto") return config.resume;
  auto latest = checkpoint::find_latest(config.output_dir);
  if (!latest) note = "no checkpoint in " + config.output_dir + ": starting fresh";
  return latest;
}

models::Model make_model(const config::Config& config, const data::DataSpec& spec,
                         const c10::Device& device) {
  auto model = make_model_to_load(config, spec, device);
  model.module->train();
  if (channels_last_applies(config)) to_channels_last(model);
  return model;
}

precision::StabilityMonitor make_monitor(const config::Config& config,
                                         const torch::nn::Module& module,
                                         const c10::Device& device) {
  std::vector<torch::Tensor> params;
  std::vector<std::string> names;
  for (const auto& item : module.named_parameters()) {
    if (!item.value().requires_grad()) continue;  // a frozen base never steps
    names.push_back(item.key());
    params.push_back(item.value());
  }
  // The records reach the host at log steps, and soon enough to stop after
  // max_consecutive_skips skipped steps.
  const int64_t skips = config.max_consecutive_skips > 0 ? config.max_consecutive_skips
                                                         : config.log_every;
  const int64_t flush_every = std::clamp<int64_t>(std::min(config.log_every, skips), 1, 1000);
  return {std::move(params), std::move(names), device, config.max_consecutive_skips, flush_every};
}

// Reports the tokenizing of text data to the observers, timed from the run's start.
data::TokenizeProgress tokenize_progress(log::Observer& observer) {
  const auto start = std::chrono::steady_clock::now();
  return [&observer, start](int64_t done, int64_t total) {
    observer.on_data_progress(
        done, total, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  };
}

}  // namespace

Run::Run(const config::Config& config, const RunContext& context, log::Observer& observer)
    : config_(config),
      context_(context),
      observer_(observer),
      device_(distributed::place_on_local_gpu(device::select_device(config.device), config.launch)),
      dist_(config, device_.device),
      splits_(data::open_dataset(config, models::sample_request(config), tokenize_progress(observer))),
      policy_(config, make_model(config, splits_.spec, device_.device), device_.device),
      monitor_(make_monitor(config, *policy_.model().module, device_.device)),
      target_check_(device_.device),
      checkpointer_(device_.device, observer) {
  progress_.batch_size = config.batch_size;
  progress_.grad_accum_steps = config.grad_accum_steps;
  progress_.overflow_steps =
      torch::zeros({}, torch::dtype(torch::kFloat32).device(device_.device));
  const TrainStateParts parts{config_,           dist_, policy_.model(), policy_.parameters(),
                              policy_.precision(), monitor_};
  check_param_dtype(config_, policy_.precision().stage_policies());
  check_train_state(parts);
  if (!device_.warning.empty()) notes_.warnings.push_back(device_.warning);
  for (auto& warning : policy_.precision().warnings()) {
    notes_.warnings.push_back(std::move(warning));
  }
  if (config.expert_parallel > 1 && !dist_.active()) {
    notes_.warnings.push_back(fmt::format("expert_parallel {} has nothing to divide in a single "
                                          "process: every sparse layer keeps all its experts",
                                          config.expert_parallel));
  }
  // A GRPO or distillation step's batch is made by its rollout, of as many prompts as its
  // completions need.
  if (!samples()) fit_batch_to_split();  // before a resume compares the checkpoint's batches with this run's
  // Pretrained weights first: a resumed run's checkpoint then replaces them.
  std::map<std::string, TensorDigest> digests;
  if (!config.init_from.empty()) {
    // The placeholders take the dtype the base is held in, so that each tensor loads into it.
    if (base_loads_deferred(config)) policy_.precision().store_frozen();
    auto loaded = load_pretrained(config, pretrained_targets(), *policy_.model().module);
    notes_.pretrained = std::move(loaded.description);
    digests = std::move(loaded.digests);
  }
  frozen_base_ = freeze_base(config_, policy_.precision(), policy_.parameters(),
                             *policy_.model().module, digests);
  if (config_.precompute_ref_logps && splits_.spec.preference) {
    reference_data_ = preference_data_digest(splits_);
    reference_weights_ = starting_weights_fingerprint(*policy_.model().module);
  }
  // Attached to the ranks, with ZeRO's shards cut, before a resume: each rank then reads only
  // what it holds of the checkpoint.
  state_ = make_train_state(parts);
  policy_.gather_with(dist_.sharded_parameters());
  // The reference holds the weights training starts from, not a resumed checkpoint's.
  std::string note;
  const auto resume = checkpoint_to_resume(config, note);
  // Before the reference's pass over the data, which a resume onto other pairs would waste.
  if (resume && !reference_data_.empty()) require_same_reference_data(*resume, reference_data_);
  const auto reference = reference_start();
  // Resume before the loader exists: the checkpoint says where the data continues.
  data::LoaderState data_start;
  if (resume) data_start = restore(*resume, note);
  progress_.loading = data::train_loader_options(config_, device_.device);
  progress_.loading.batch_size = samples() ? prompts_per_rollout() : progress_.batch_size;
  progress_.batches.emplace(splits_.train, progress_.loading, data_start);
  if (samples()) {
    // Each prompt batch is one rollout, which num_iterations steps train on.
    progress_.steps_per_epoch = progress_.batches->batches_per_epoch() * config_.num_iterations;
    set_up_rollout();
  } else {
    fit_accumulation_to_epoch();
    progress_.steps_per_epoch = progress_.batches->batches_per_epoch() / progress_.grad_accum_steps;
  }
  progress_.total_steps =
      config.max_steps > 0 ? config.max_steps : config.epochs * progress_.steps_per_epoch;
  if (progress_.start_step >= progress_.total_steps && progress_.start_step > 0) {
    note += fmt::format("; it is at or past the last step ({}): nothing to train, raise "
                        "--max_steps or --epochs to train on",
                        progress_.total_steps);
  }
  progress_.schedule = {config.lr, config.lr * config.min_lr_ratio, config.warmup_steps,
                        progress_.total_steps};
  notes_.resume = note;
  set_up_speed_features(reference);
  peak_flops_ = device::peak_flops(device_.device, policy_.precision().policy().compute_dtype);
  // The snapshot buffer is set up now, as part of startup, not in the first save's pause.
  if (progress_.start_step < progress_.total_steps) {
    // Every rank asks for the tensors: under expert parallelism that gathers the experts.
    auto tensors = state_->tensors();
    if (!state_->save_path(config_.output_dir, progress_.start_step).empty()) {
      checkpointer_.reserve(tensors);
    }
  }
}

void Run::fit_batch_to_split() {
  const int64_t ranks = dist_.world_size();
  const int64_t samples = splits_.train->size();
  const int64_t fitted = data::fitted_batch_size(samples, progress_.batch_size, ranks, config_.dataset);
  if (fitted == progress_.batch_size) return;
  const auto per_rank = [ranks](int64_t batch) {
    return ranks > 1 ? fmt::format("{} per rank x {} ranks", batch, ranks) : std::to_string(batch);
  };
  notes_.warnings.push_back(fmt::format(
      "the training split of {} has {} samples, fewer than one batch of {}: training with batch "
      "size {}{}",
      config_.dataset, samples, per_rank(progress_.batch_size), per_rank(fitted),
      samples > fitted * ranks
          ? fmt::format(" ({} samples unused per epoch)", samples - fitted * ranks)
          : ""));
  progress_.batch_size = fitted;
}

// Small data again: an epoch of fewer batches than grad_accum_steps accumulates all of them, so
// that every optimizer step sees the whole epoch, as the Hugging Face Trainer does.
void Run::fit_accumulation_to_epoch() {
  const int64_t batches = progress_.batches->batches_per_epoch();
  if (batches >= progress_.grad_accum_steps) return;
  notes_.warnings.push_back(fmt::format(
      "an epoch of {} has {} batch{} of {}, fewer than grad_accum_steps {}: accumulating {}",
      config_.dataset, batches, batches == 1 ? "" : "es", progress_.batch_size, progress_.grad_accum_steps,
      batches));
  progress_.grad_accum_steps = batches;
}

void Run::set_up_speed_features(const ReferenceStart& reference) {
  choose_fused_kernels();
  report_fused_paths();
  if (policy_.precision().policy().fp8) use_fp8();
  if (auto note = apply_tf32(config_.allow_tf32, device_.device); !note.empty()) {
    notes_.speed.push_back(std::move(note));
  }
  if (channels_last_applies(config_)) {
    notes_.speed.emplace_back("Channels-last: the CNN's weights and activations in NHWC");
  }
  const auto obstacle =
      dist_.active() ? std::string("a distributed step waits for the other ranks on the host")
      : splits_.spec.preference
          ? std::string("preference batches name their pairs, which a replay would not refresh")
      : samples() ? std::string("a rollout's micro-batches change shape with its completions")
          : cuda_graph_obstacle(device_.device, config_.grad_ckpt, config_.dropout,
                                splits_.train->gather({0}).positions.defined());
  // O2 allocates its fp32 gradients per step and a schedule changes dtypes: both stay eager.
  const bool eager_precision =
      policy_.precision().masters().enabled() || policy_.precision().stages().size() > 1;
  const bool graphed = config_.cuda_graphs && obstacle.empty() && !eager_precision;
  if (graphed) {
    notes_.speed.push_back(fmt::format("CUDA graphs: the step is captured after {} warm-up steps "
                                       "and replayed",
                                       TrainStep::kWarmupSteps));
  } else if (config_.cuda_graphs) {
    notes_.speed.push_back(
        "CUDA graphs: off, " +
        (obstacle.empty() ? std::string("O2 master weights and precision schedules run eagerly")
                          : obstacle) +
        "; the step runs eagerly");
  }
  StepParts parts;
  // Within the step the targets are checked on the device: the monitor reports a bad one.
  monitor_.watch_targets(target_check_.values());
  parts.objective = make_objective(reference);
  parts.parameters = policy_.parameters();
  parts.scaler = &policy_.precision().scaler();
  state_->step_parts(parts);
  parts.max_grad_norm = config_.max_grad_norm;
  parts.overflow_steps = progress_.overflow_steps;
  parts.monitor = &monitor_;
  // Underflow is measured against the dtype autocast computes in now (fp8 runs report bf16's).
  parts.underflow_dtype = [this] {
    const auto dtype = policy_.precision().policy().compute_dtype;
    return dtype == torch::kHalf || dtype == torch::kBFloat16 ? dtype : c10::kFloat;
  };
  if (!config_.profile.empty()) {
    parts.gradients_ready = [this](const std::vector<torch::Tensor>& gradients) {
      if (profiler_ != nullptr) profiler_->gradients_ready(gradients);
    };
  }
  if (dist_.active()) {
    parts.before_backward = [this](bool last) { dist_.before_backward(last); };
    parts.after_backward = [this] {
      dist_.after_backward();
      policy_.release_gathered();  // ZeRO-3: the root, held through the step's passes
    };
    parts.agree_found_inf = [this](torch::Tensor& found_inf) { dist_.agree_found_inf(found_inf); };
    parts.units_over_ranks = [this](torch::Tensor& units) {
      dist_.sum(units, "the all-reduce of the step's scored targets or pairs");
    };
    parts.ranks = dist_.world_size();
  }
  step_ = std::make_unique<TrainStep>(std::move(parts), graphed);
}

void Run::choose_fused_kernels() {
  if (config_.fused_kernels != config::AutoSwitch::auto_select || !policy_.model().set_fused ||
      !device_.device.is_cuda()) {
    return;
  }
  std::string reason;
  if (dist_.active()) {
    reason = "a distributed run keeps them: its ranks would measure apart";
  } else if (policy_.precision().policy().fp8) {
    reason = "fp8 runs its Linear layers and head through them";
  } else if (policy_.precision().stages().size() > 1) {
    reason = "a precision schedule changes what they compute";
  }
  // What recommend estimates for the plain ops at this micro-batch (their head holds the
  // logits whole, their MLP its GELU's output).
  auto plain = config_;
  plain.fused_kernels = config::AutoSwitch::off;
  const auto dims = models::model_dims(plain, {}, policy_.model().tokens_per_sample);
  const auto* properties = at::cuda::getDeviceProperties(device_.device.index());
  const plan::GpuTarget gpu{
      static_cast<double>(properties->totalGlobalMem) / (1 << 30),
      properties->major + properties->minor / 10.0};
  const auto estimate = plan::estimate_memory(dims, plan::run_scheme(config_, gpu),
                                                config_.optimizer, config_.momentum, progress_.batch_size);
  const int64_t plain_bytes =
      config_.grad_ckpt && estimate.total_checkpointed() >= 0 ? estimate.total_checkpointed()
                                                              : estimate.total();
  const int64_t usable = plan::usable_bytes(gpu);
  std::optional<FusedTiming> timing;
  if (reason.empty() && plain_bytes <= usable) {
    // The run's own micro-batch shape, token 1 throughout: the work does not depend on values.
    const auto ones = torch::ones({progress_.batch_size, policy_.model().tokens_per_sample},
                                  torch::dtype(torch::kInt64).device(device_.device));
    const data::Batch batch{ones, ones};
    const auto pass = [&] {
      const auto loss = loss_of(batch, nullptr);
      // Gradients handed back, not accumulated: no parameter's .grad changes, no hook runs.
      torch::autograd::grad({loss}, policy_.parameters(), {}, false, false, /*allow_unused=*/true);
    };
    // Dropout draws from the generators: the run's draws must not depend on the measuring.
    auto cpu = at::detail::getDefaultCPUGenerator();
    auto gpu_generator = at::cuda::detail::getDefaultCUDAGenerator(device_.device.index());
    const auto cpu_state = cpu.get_state();
    const auto gpu_state = gpu_generator.get_state();
    try {
      timing = time_fused(policy_.model().set_fused, pass, device_.device);
    } catch (const c10::OutOfMemoryError&) {
      reason = "the plain ops ran out of the GPU's memory";
    }
    cpu.set_state(cpu_state);
    gpu_generator.set_state(gpu_state);
  }
  const auto choice = choose_fused(timing, reason, plain_bytes, usable);
  policy_.set_fused(choice.fused);
  notes_.speed.push_back(choice.line);
}

// The GPT's fused paths on this GPU, each probed and self-checked now rather than at its first
// use inside a step: one line names what runs and what falls back to ATen, and why.
void Run::report_fused_paths() {
  if (!device_.device.is_cuda()) return;
  using kernels::FusedPath;
  auto paths = state_->fused_paths();
  if (policy_.fused() && models::family_of(config_).transformer_blocks) {
    paths.push_back(FusedPath::softmax_cross_entropy);
    paths.push_back(FusedPath::add_layer_norm);
    if (config_.gemm_epilogues && policy_.precision().policy().autocast) {
      paths.push_back(FusedPath::gemm_epilogues);
    }
  }
  const auto base = config_.base_dtype;
  if (config_.lora_rank > 0 && (base == config::BaseDtype::nf4 || base == config::BaseDtype::int8 ||
                                base == config::BaseDtype::fp8)) {
    paths.push_back(FusedPath::dequantize);
    // An fp8 base's forward GEMMs under bf16 (precision/quantized_weight.cpp).
    if (base == config::BaseDtype::fp8 &&
        policy_.precision().policy().compute_dtype == c10::kBFloat16) {
      paths.push_back(FusedPath::fp8_rowwise_gemm);
    }
  }
  if (policy_.precision().policy().fp8) {
    paths.push_back(FusedPath::fp8_casts);
    const auto gemm = config_.fp8_scaling == config::Fp8Scaling::rowwise
                          ? FusedPath::fp8_rowwise_gemm
                          : FusedPath::fp8_gemm;
    // fp8 has no fallback: without its GEMM the run would not be the fp8 run asked for.
    if (const auto status = kernels::kernel_support().status(gemm, device_.device); !status.runs) {
      throw RuntimeError(fmt::format(
          "mixed_precision fp8 with {} scaling cannot run on {}: its {} {}; use bf16, or "
          "--fp8_scaling {}",
          config::to_string(config_.fp8_scaling), device::device_description(device_.device),
          kernels::path_name(gemm), status.reason,
          gemm == FusedPath::fp8_rowwise_gemm ? "delayed" : "rowwise"));
    }
    paths.push_back(gemm);
  }
  if (paths.empty()) return;
  notes_.speed.push_back("Fused paths: " +
                         kernels::kernel_support().summary(device_.device, paths));
  for (auto& warning : kernels::kernel_support().take_warnings()) {
    notes_.warnings.push_back(std::move(warning));
  }
}

void Run::use_fp8() {
  const auto recipe = precision::fp8_recipe(config_);
  // Layers of one shape are measured once; the key says which GPU and recipe the times are for.
  precision::Fp8TimingCache cache;
  auto plan = precision::choose_fp8_layers(
      config_.fp8_layers, models::fp8_candidates(policy_.model().layers, policy_.fused()),
      progress_.batch_size * policy_.model().tokens_per_sample,
      fmt::format("{}, {} scaling", device::device_description(device_.device),
                  config::to_string(config_.fp8_scaling)),
      precision::gemm_timer(device_.device, recipe), cache);
  if (plan.setting == "auto") {
    // Each rank timed the GEMMs on its own GPU, and two GPUs can put a shape on either side of
    // the line: every rank takes rank 0's choice, so that the ranks train one model.
    std::vector<bool> fp8;
    for (const auto& layer : plan.layers) fp8.push_back(layer.fp8);
    fp8 = dist_.main_flags(fp8, "the broadcast of rank 0's fp8 layer choice");
    for (size_t i = 0; i < fp8.size(); ++i) plan.layers[i].fp8 = fp8[i];
  }
  const auto table = plan.table();
  notes_.speed.insert(notes_.speed.end(), table.begin(), table.end());
  if (!policy_.model().layers.other_matmuls.empty()) {
    notes_.speed.push_back("Not in fp8: " + policy_.model().layers.other_matmuls);
  }
  models::attach_fp8(*policy_.model().module, recipe,
                     [&plan](const std::string& layer) { return plan.fp8(layer); });
  policy_.model().set_fp8_head(plan.fp8("head"));
}

NamedTensors Run::pretrained_targets() const {
  auto out = model_tensors(policy_.precision(), policy_.model());
  const auto& frozen = policy_.precision().masters().frozen();
  out.insert(out.end(), frozen.begin(), frozen.end());
  return out;
}

log::RunInfo Run::describe() const {
  log::RunInfo info;
  info.device = device::device_description(device_.device);
  info.device_reason = device_.reason;
  info.model = config_.model;
  info.architecture = policy_.model().architecture;
  info.pretrained = notes_.pretrained;
  info.parameters = models::parameter_count(*policy_.model().module);
  info.dataset = config_.dataset;
  info.data_description = splits_.description;
  info.language_model = splits_.spec.task == data::Task::language_model;
  info.peak_flops = peak_flops_;
  info.precision = policy_.precision().policy().name();
  info.precision_source = context_.precision_source;
  info.precision_reason = policy_.precision().choice().reason;
  info.precision_fell_back = policy_.precision().choice().fell_back;
  info.precision_explanation = policy_.precision().policy().explanation();
  info.opt_level = std::string(config::to_string(config_.amp_opt_level));
  if (policy_.precision().stages().size() > 1) {
    for (const auto& stage : policy_.precision().stages()) {
      info.precision_schedule.push_back(config::stage_text(stage));
    }
    info.precision_stage = static_cast<int64_t>(policy_.precision().stage()) + 1;
  }
  const auto policies = policy_.precision().stage_policies();
  if (models::wants_compat_report(policies)) {
    // The riskiest stage speaks for the schedule: fp16 if there is one, else the first half one.
    auto riskiest = std::ranges::find_if(policies, [](const auto& p) { return p.loss_scaling; });
    if (riskiest == policies.end()) {
      riskiest = std::ranges::find_if(policies, [](const auto& p) { return p.autocast; });
    }
    info.compat_report =
        models::compat_report(policy_.model(), policy_.precision().islands(), *riskiest);
  }
  info.loss_scaling = policy_.precision().scaler().enabled();
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
  info.optimizer = state_->optimizer().describe();
  info.batch_size = progress_.batch_size;
  info.grad_accum_steps = progress_.grad_accum_steps;
  info.total_steps = progress_.total_steps;
  info.steps_per_epoch = progress_.steps_per_epoch;
  info.peak_lr = progress_.schedule.peak_lr;
  info.min_lr = progress_.schedule.min_lr;
  info.warmup_steps = config_.warmup_steps;
  info.max_grad_norm = config_.max_grad_norm;
  info.start_step = progress_.start_step;
  info.resume_note = notes_.resume;
  if (dist_.active()) {
    info.distributed = fmt::format(
        "{}; global batch {} = {} ranks x {} x {} accumulation", dist_.describe(),
        dist_.world_size() * progress_.batch_size * progress_.grad_accum_steps, dist_.world_size(),
        progress_.batch_size, progress_.grad_accum_steps);
    if (auto note = state_->parallel_note(); !note.empty()) info.distributed += "; " + note;
  }
  info.zero = state_->note();
  info.lora = frozen_base_.note;
  info.objective = step_->objective().describe();
  info.speed_notes = notes_.speed;
  info.warnings = notes_.warnings;
  return info;
}

}  // namespace ampt::train

#include "ampt/commands/recommend.h"

#include "ampt/models/catalog.h"
#include "ampt/plan/memory_plan.h"

#include "ampt/config/enum_names.h"
#include "ampt/config/resolve.h"
#include "ampt/config/command_flags.h"
#include "ampt/config/values.h"
#include "ampt/core/errors.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <optional>

namespace ampt::commands {
namespace {

// A sample's shape as written, "784" or "3,32,32" (or "3x32x32"); nullopt unless every part is
// an integer >= 1.
std::optional<std::vector<int64_t>> shape_of(std::string_view text) {
  std::vector<int64_t> shape;
  std::string normalised(text);
  std::ranges::replace(normalised, 'x', ',');
  for (const auto part : config::split(normalised, ',')) {
    const auto value = config::parse_int(part);
    if (!value || *value < 1) return std::nullopt;
    shape.push_back(*value);
  }
  return shape;
}

std::string shape_problem(std::string_view text) {
  return text.empty() || shape_of(text) ? "" : "expected positive integers like 784 or 3,32,32";
}

// What recommend takes besides the training options (which describe the run to plan).
struct RecommendSettings {
  double gpu_memory_gb = 80;
  double compute_capability = 9.0;
  std::optional<int64_t> global_batch;
  std::optional<int64_t> seq_len;
  std::string input_shape;
  int64_t world_size = 1;
};

const config::FlagTable<RecommendSettings>& recommend_flags() {
  using config::Range;
  using S = RecommendSettings;
  static const config::FlagTable<S> table = {
      config::flag_only(config::float_option("gpu_memory_gb", "", &S::gpu_memory_gb, Range::above(0),
                                             "Memory of the GPU to plan for, in GiB")),
      config::flag_only(config::float_option(
          "compute_capability", "", &S::compute_capability, Range::above(0),
          "The GPU's compute capability: bf16 needs 8.0 (Ampere), fp8 8.9 (Ada, Hopper)")),
      config::flag_only(config::optional_integer_option(
          "global_batch", "", &S::global_batch, Range::at_least(1),
          "batch_size x grad_accum_steps x world_size", "Samples per optimizer step to reach")),
      config::flag_only(config::optional_integer_option("seq_len", "", &S::seq_len,
                                                        Range::at_least(1), "its block_size",
                                                        "Tokens per sample of a GPT")),
      config::default_noted(
          config::flag_only(config::explained_string_option(
              "input_shape", "", &S::input_shape, shape_problem,
              "positive integers like 784 or 3,32,32", "SHAPE", "One MLP/CNN sample's shape")),
          "the synthetic data's"),
      config::flag_only(config::integer_option(
          "world_size", "", &S::world_size, Range::at_least(1),
          "Ranks of data parallelism to plan for: estimates become per rank, with --zero_stage's "
          "sharding (--zero_stage 3 also finds the fewest ranks on which the run fits)")),
  };
  return table;
}

std::string grouped(int64_t n) {
  const auto digits = std::to_string(n);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string sharding_text(const plan::Sharding& s) {
  if (!s.active()) return "";
  const char* what =
      s.zero_stage == 0   ? "everything replicated, gradients also in the all-reduce buckets"
      : s.zero_stage == 1 ? "optimizer state and fp32 masters sharded"
      : s.zero_stage == 2 ? "optimizer state, fp32 masters and gradients sharded"
                          : "parameters, gradients, optimizer state and fp32 masters sharded; two "
                            "blocks gathered at a time";
  const char* whole = s.zero_stage < 3
                          ? "activations and weights are whole on every rank"
                          : "activations are whole on every rank, weights and gradients only "
                            "the root's (embeddings, final norm, head) and two blocks'";
  if (s.expert_parallel > 1 && s.zero_stage == 0) {
    return fmt::format("Data parallel: {} ranks, expert parallel {} (each rank holds 1/{} of every "
                       "sparse layer's experts and their gradients and optimizer state, the "
                       "other weights whole; only those in the all-reduce buckets); activations "
                       "are whole on every rank.\n",
                       s.world_size, s.expert_parallel, s.expert_parallel);
  }
  if (s.expert_parallel > 1) {
    return fmt::format("Data parallel: {} ranks, expert parallel {} (each rank holds 1/{} of every "
                       "sparse layer's experts whole, with their gradients and optimizer state), "
                       "ZeRO stage {} over the other parameters ({}); {}.\n",
                       s.world_size, s.expert_parallel, s.expert_parallel, s.zero_stage, what,
                       whole);
  }
  return fmt::format("Data parallel: {} ranks, ZeRO stage {} ({}); {}.\n", s.world_size,
                     s.zero_stage, what, whole);
}

// ZeRO-3's fewest ranks for the run's precision, micro-batch and --grad_ckpt: "ZeRO-3 (bf16/O1,
// micro-batch 1, activation checkpointing): fits the 71.0 GiB usable of the 80 GiB GPU from 4
// ranks (per rank 46.0 GiB on 4; 75.9 GiB on 2)".
std::string fewest_ranks_text(const models::ModelDims& dims, const config::Config& config,
                              const plan::GpuTarget& gpu, const plan::Sharding& sharding) {
  constexpr int64_t kMaxRanks = 1024;
  auto scheme = plan::run_scheme(config, gpu);
  if (!plan::scheme_applies(scheme, dims)) {  // fp8 on an MLP or CNN: autocast's half dtype
    auto automatic = config;
    automatic.mixed_precision = config::MixedPrecision::auto_select;
    scheme = plan::run_scheme(automatic, gpu);
  }
  const bool can_checkpoint = dims.transformer();
  const bool checkpointing = config.grad_ckpt && can_checkpoint;
  const auto fewest = [&](bool ckpt) {
    return plan::fewest_ranks(dims, scheme, ckpt, config.optimizer, config.momentum,
                                config.batch_size, gpu, sharding, kMaxRanks);
  };
  const auto r = fewest(checkpointing);
  const double usable = plan::gib(plan::usable_bytes(gpu));
  std::string text = fmt::format(
      "ZeRO-3 ({}, micro-batch {}{}{}): ", scheme.name(), config.batch_size,
      checkpointing ? ", activation checkpointing" : "",
      sharding.expert_parallel > 1 ? fmt::format(", expert parallel {}", sharding.expert_parallel) : "");
  if (r.ranks == 1) {
    text += fmt::format("fits one {:.0f} GiB GPU without sharding ({:.1f} GiB of the {:.1f} GiB "
                        "usable)",
                        gpu.memory_gb, plan::gib(r.bytes), usable);
  } else if (r.ranks > 1 && r.fewer_bytes < 0) {
    // Expert parallelism's groups: no fewer ranks can run it.
    text += fmt::format("fits the {:.1f} GiB usable of the {:.0f} GiB GPU on {} ranks, the fewest "
                        "its expert groups allow (per rank {:.1f} GiB)",
                        usable, gpu.memory_gb, r.ranks, plan::gib(r.bytes));
  } else if (r.ranks > 1) {
    text += fmt::format("fits the {:.1f} GiB usable of the {:.0f} GiB GPU from {} ranks (per rank "
                        "{:.1f} GiB on {}; {:.1f} GiB on {})",
                        usable, gpu.memory_gb, r.ranks, plan::gib(r.bytes), r.ranks,
                        plan::gib(r.fewer_bytes), r.ranks / 2);
  } else {
    text += fmt::format("does not fit the {:.0f} GiB GPU on any number of ranks up to {}: the "
                        "activations, the root and two gathered blocks with their gradients, "
                        "which more ranks do not shrink, take {:.1f} GiB per rank of the {:.1f} "
                        "GiB usable",
                        gpu.memory_gb, kMaxRanks, plan::gib(r.unsharded), usable);
  }
  bool rescued = false;
  if (!checkpointing && can_checkpoint && r.ranks != 1) {
    const auto ckpt = fewest(true);
    if (ckpt.ranks > 0 && (r.ranks == 0 || ckpt.ranks < r.ranks)) {
      rescued = true;
      text += fmt::format("; with --grad_ckpt from {} {} ({:.1f} GiB per rank)", ckpt.ranks,
                          ckpt.ranks == 1 ? "rank" : "ranks", plan::gib(ckpt.bytes));
    }
  }
  if (r.ranks == 0 && !rescued) text += "; a smaller --batch_size lowers the activations";
  return text + "\n";
}

// "- bf16/O1: 4.00 + 1.00 + 1.00 + 2.00 = 8.00 (one process: 16.00)"
std::string bytes_per_parameter(const models::Scheme& scheme, const plan::MemoryEstimate& m,
                                const plan::MemoryEstimate& whole, int64_t parameters) {
  const auto per = [parameters](int64_t bytes) {
    return static_cast<double>(bytes) / static_cast<double>(parameters);
  };
  return fmt::format("- {}: {:.2f} + {:.2f} + {:.2f} + {:.2f} = {:.2f} (one process: {:.2f})\n",
                     scheme.name(), per(m.weights), per(m.gradients), per(m.masters),
                     per(m.optimizer), per(m.weights + m.gradients + m.masters + m.optimizer),
                     per(whole.weights + whole.gradients + whole.masters + whole.optimizer));
}

// "LoRA rank 16 on 48 Linear layers (c_attn): ..." after the model's line; empty without LoRA.
std::string lora_text(const models::ModelDims& d, const plan::ParameterCounts& p) {
  if (!d.lora.active()) return "";
  const auto held = d.lora.base_dtype == config::BaseDtype::auto_select
                        ? std::string("held in the precision's half dtype (fp32 in fp32/O0)")
                        : fmt::format("the block Linear weights{} held in {}, the rest in the "
                                      "precision's half dtype (fp32 in fp32/O0)",
                                      d.terms.stacked_weights.empty() ? "" : " and the experts",
                                      config::to_string(d.lora.base_dtype));
  const auto experts = std::ranges::count_if(d.lora.adapted, [](const auto& l) { return l.experts > 1; });
  return fmt::format(
      "LoRA rank {} on {} Linear layers{} ({}{}): {} trainable parameters ({:.2f}%) with fp32 "
      "masters and optimizer state; {} frozen, {}, with no gradients or optimizer state\n",
      d.lora.rank, static_cast<int64_t>(d.lora.adapted.size()) - experts,
      experts > 0 ? fmt::format(" and {} expert weights", experts) : "",
      fmt::join(d.lora.targets, ","),
      d.lora.parameters.empty() ? "" : fmt::format("; {}", fmt::join(d.lora.parameters, ",")),
      grouped(p.trainable),
      100.0 * static_cast<double>(p.trainable) / static_cast<double>(p.total),
      grouped(p.total - p.trainable), held);
}

// "--objective grpo: 64 completions sampled at once ..." after the LoRA line.
std::string rollout_text(const config::Config& config, const models::ModelDims& d) {
  const auto& r = d.rollout;
  const int64_t cache = r.completions * d.seq_len * d.terms.cache_width;
  const std::string reference =
      config.objective == config::Objective::distill ? "the teacher (--teacher) not counted"
      : config.beta == 0 ? "no reference model (beta 0)"
      : r.reference_copy ? "a frozen copy of the model as the KL's reference (its Linear weights in the compute dtype)"
                         : "the KL's reference is the base with the adapters off: no second model";
  return fmt::format(
      "--objective {}: {} completions (batch_size x grad_accum_steps) sampled at once between the steps, "
      "their KV cache of {} tokens each (--seq_len: the prompt and max_completion_length {}) {:.2f} GiB in a "
      "half dtype, {:.2f} GiB in fp32, counted where it passes the activations; trained {} at a time, the "
      "logits held on their completion's positions alone; {}\n",
      config::to_string(config.objective), r.completions, d.seq_len, r.completion_length, plan::gib(2 * cache), plan::gib(4 * cache),
      config.batch_size, reference);
}

// The objective's line after the LoRA line ("dpo: each pair two sequences ..."); empty for token
// cross-entropy.
std::string objective_text(const config::Config& config, const models::ModelDims& d) {
  if (d.rollout.active) return rollout_text(config, d);
  if (!d.preference.active) return "";
  const std::string rows = d.preference.padded
                               ? "a micro-batch of N pairs is 2N padded sequences"
                               : "a micro-batch of N windows holds whole packed pairs";
  const std::string reference =
      d.preference.reference_copy
          ? "a frozen copy of the model as the reference (its Linear weights in the compute dtype)"
      : !config::needs_reference(config.objective) ? "no reference model"
      : d.lora.active() ? "the reference is the base with the adapters off: no second model"
                        : "the reference's log-probabilities precomputed: no second model";
  return fmt::format("--objective {}: {}; the logits held whole for the log-probabilities; {}\n",
                     config::to_string(config.objective), rows, reference);
}

}  // namespace

std::vector<config::FlagReference> recommend_flag_references() {
  return config::flag_references(recommend_flags());
}

std::string recommend_help() {
  return config::command_help(
      "recommend",
      "Usage: ampt recommend [--gpu_memory_gb GB] [--global_batch N] [TRAINING OPTIONS]...\n\n"
      "Estimates the training memory of the configured model (--model and its dimensions,\n"
      "--batch_size as the micro-batch, --optimizer) for each precision and opt level: weights,\n"
      "gradients, fp32 masters, optimizer state, cast copies and activations, with and without\n"
      "activation checkpointing; then recommends the precision, opt level, micro-batch and\n"
      "gradient accumulation for the global batch on the given GPU, and says why. With\n"
      "--world_size N every figure is one rank's, with --zero_stage's sharding; --zero_stage 3\n"
      "also says from how many ranks the run (its precision, --batch_size and --grad_ckpt) fits\n"
      "the GPU. With --lora_rank R the base is frozen and only the adapters train. With a\n"
      "preference --objective the estimate counts two sequences per padded pair, the logits\n"
      "held whole and the reference model (a copy, or none). With --objective grpo it counts the\n"
      "sampler's KV cache for every completion of a rollout, --seq_len tokens each (the prompt\n"
      "and the completion), the completion's logits and beta's reference.",
      recommend_flag_references(), &models::catalog());
}

int run_recommend(const std::vector<std::string>& args, const Environment& env) {
  std::vector<std::string> training_args;
  const auto flags =
      config::parse_command_flags("recommend", recommend_flags(), args, &training_args);
  const auto resolved = config::resolve(training_args, env, models::catalog());
  const auto& config = resolved.config();
  plan::GpuTarget gpu;
  gpu.memory_gb = flags.gpu_memory_gb;
  gpu.compute_capability = flags.compute_capability;
  plan::Sharding sharding{flags.world_size, config.zero_stage};
  sharding.param_bytes = config.param_dtype == config::ParamDtype::fp32   ? 4
                         : config.param_dtype == config::ParamDtype::auto_select ? 0
                                                                              : 2;
  sharding.reduce_bytes = config.reduce_dtype == config::ReduceDtype::fp32   ? 4
                          : config.reduce_dtype == config::ReduceDtype::bf16 ? 2
                                                                             : 0;
  const int64_t global_batch = flags.global_batch.value_or(
      config.batch_size * config.grad_accum_steps * sharding.world_size);
  if (global_batch % sharding.world_size != 0) {
    throw UsageError(fmt::format("--global_batch {} does not divide among --world_size {} ranks",
                                 global_batch, sharding.world_size));
  }
  // Expert parallelism plans rank 0 of the run as --world_size ranks would launch it: its share
  // of the experts.
  auto planned = config;
  config::check_expert_groups(config.expert_parallel, sharding.world_size);
  if (config.expert_parallel > 1) {
    planned.launch.world_size = sharding.world_size;
    planned.launch.rank = 0;
    sharding.expert_parallel = config.expert_parallel;
  }
  const auto shape = shape_of(flags.input_shape).value_or(std::vector<int64_t>{});
  const auto dims = models::model_dims(planned, shape, flags.seq_len.value_or(0));
  // The header counts the whole model; the table, one rank's share.
  const int64_t model_parameters =
      sharding.expert_parallel > 1
          ? plan::count_parameters(models::model_dims(config, shape, flags.seq_len.value_or(0))).total
          : plan::count_parameters(dims).total;
  const int64_t usable = plan::usable_bytes(gpu);
  if (usable <= 0) {
    throw UsageError(fmt::format("--gpu_memory_gb {} leaves nothing after the 1 GiB CUDA context",
                                 gpu.memory_gb));
  }

  const auto params = plan::count_parameters(dims);
  std::string text = fmt::format(
      "Model {}: {} parameters ({}); optimizer {}\n{}{}"
      "GPU: {:.0f} GiB, compute capability {:.1f}; usable {:.1f} GiB = {:.0f} GiB x {:.2f} "
      "(allocator fragmentation) - 1 GiB (CUDA context, cuBLAS/cuDNN workspaces)\n\n"
      "{}Estimated peak memory in GiB{} at micro-batch {} (--batch_size):\n\n"
      "| precision/opt level | weights | gradients | fp32 masters | optimizer | cast copies | "
      "activations | total | with --grad_ckpt | fits |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n",
      dims.name, grouped(model_parameters), dims.terms.description,
      config.optimizer == config::OptimizerKind::adamw ? "adamw (2 fp32 states per parameter)"
                                                       : "sgd",
      lora_text(dims, params), objective_text(config, dims), gpu.memory_gb, gpu.compute_capability, plan::gib(usable), gpu.memory_gb, 1.0 - plan::kFragmentation,
      sharding_text(sharding), sharding.active() ? " per rank" : "", config.batch_size);
  std::string not_listed;
  std::string per_parameter;
  for (const auto& scheme : plan::memory_schemes()) {
    if (!plan::scheme_runs(scheme, dims, sharding)) continue;
    if (scheme.precision == models::Precision::fp8 && gpu.compute_capability < 8.9) {
      not_listed = fmt::format("\n{}: not listed, compute capability {:.1f} has no fp8 tensor "
                               "cores (they start at 8.9: Ada, Hopper)\n",
                               scheme.name(), gpu.compute_capability);
      continue;
    }
    const auto whole = plan::estimate_memory(dims, scheme, config.optimizer, config.momentum, config.batch_size);
    const auto m = plan::shard_memory(whole, dims, scheme, sharding);
    if (sharding.active()) per_parameter += bytes_per_parameter(scheme, m, whole, params.total);
    const bool fits = m.total() <= usable;
    const bool fits_ckpt = m.activations_checkpointed >= 0 && m.total_checkpointed() <= usable;
    text += fmt::format(
        "| {} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {} | {} |\n",
        scheme.name(), plan::gib(m.weights), plan::gib(m.gradients), plan::gib(m.masters), plan::gib(m.optimizer),
        plan::gib(m.cast_copies), plan::gib(m.activations), plan::gib(m.total()),
        m.activations_checkpointed < 0 ? "–" : fmt::format("{:.2f}", plan::gib(m.total_checkpointed())),
        fits ? "yes" : fits_ckpt ? "with --grad_ckpt" : "no");
  }

  text += not_listed;
  if (sharding.active()) {
    text += "\nPersistent bytes per parameter per rank (weights + gradients + fp32 masters + "
            "optimizer state):\n\n" + per_parameter;
  }
  if (config.zero_stage == 3) text += "\n" + fewest_ranks_text(dims, config, gpu, sharding);

  const auto r = plan::recommend(dims, config.optimizer, config.momentum,
                                   global_batch / sharding.world_size, gpu, sharding);
  if (r.fits) {
    // The user's own training flags (model, data ...) with the recommended settings in place of
    // theirs; YAML and environment settings still apply when the command runs.
    // The recommendation says whether to checkpoint, at the end: the user's switch would be a
    // second --grad_ckpt.
    std::string command = "ampt train";
    for (const auto& arg : config::take_flags(training_args, {"batch_size", "grad_accum_steps",
                                                              "mixed_precision", "amp_opt_level",
                                                              "grad_ckpt"})
                               .rest) {
      command += arg.find(' ') == std::string::npos ? " " + arg : " '" + arg + "'";
    }
    text += fmt::format(
        "\nRecommendation for a global batch of {}: {} {}, micro-batch {} x {} accumulation "
        "steps{}\n  {} --mixed_precision {} --amp_opt_level {} --batch_size {} "
        "--grad_accum_steps {}{}\n",
        global_batch, models::to_string(r.scheme.precision), config::to_string(r.scheme.opt_level),
        r.micro_batch, r.grad_accum, r.checkpointing ? ", activation checkpointing" : "", command,
        models::to_string(r.scheme.precision), config::to_string(r.scheme.opt_level),
        r.micro_batch, r.grad_accum, r.checkpointing ? " --grad_ckpt" : "");
  } else {
    text += fmt::format("\nNo setup fits a {:.0f} GiB GPU.\n", gpu.memory_gb);
  }
  text += "\nWhy:\n";
  for (const auto& reason : r.reasons) text += "- " + reason + "\n";
  std::fputs(text.c_str(), stdout);
  return 0;
}

}  // namespace ampt::commands

#include "ampt/train/recommend.h"

#include "ampt/config/resolve.h"
#include "ampt/config/subcommand_flags.h"
#include "ampt/core/errors.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <charconv>
#include <cmath>
#include <optional>
#include <sstream>

namespace ampt::train {
namespace {

const std::vector<config::SubcommandFlag>& own_flags() {
  static const std::vector<config::SubcommandFlag> flags = {
      {"gpu_memory_gb", "GB", "80", "Memory of the GPU to plan for, in GiB"},
      {"compute_capability", "X.Y", "9.0",
       "The GPU's compute capability: bf16 needs 8.0 (Ampere), fp8 8.9 (Ada, Hopper)"},
      {"global_batch", "N", "",
       "Samples per optimizer step to reach [default: batch_size x grad_accum_steps]"},
      {"seq_len", "T", "", "Tokens per sample of a GPT [default: its block_size]"},
      {"input_shape", "SHAPE", "",
       "One MLP/CNN sample, e.g. 784 or 3,32,32 [default: the synthetic data's]"},
  };
  return flags;
}

double parse_number(const std::string& flag, const std::string& text, double above) {
  double value = 0.0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || !(value > above) ||
      !std::isfinite(value)) {
    throw UsageError(
        fmt::format("invalid value '{}' for --{}: expected a number > {}", text, flag, above));
  }
  return value;
}

int64_t parse_count(const std::string& flag, const std::string& text) {
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 1) {
    throw UsageError(
        fmt::format("invalid value '{}' for --{}: expected an integer >= 1", text, flag));
  }
  return value;
}

std::vector<int64_t> parse_shape(const std::string& text) {
  std::vector<int64_t> shape;
  std::string normalised = text;
  for (auto& c : normalised) {
    if (c == 'x') c = ',';
  }
  std::stringstream in(normalised);
  for (std::string part; std::getline(in, part, ',');) {
    int64_t value = 0;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), value);
    if (part.empty() || ec != std::errc() || end != part.data() + part.size() || value < 1) {
      throw UsageError(fmt::format(
          "invalid value '{}' for --input_shape: expected positive integers like 784 or 3,32,32",
          text));
    }
    shape.push_back(value);
  }
  return shape;
}

double gib(int64_t bytes) { return static_cast<double>(bytes) / static_cast<double>(1 << 30); }

std::string grouped(int64_t n) {
  const auto digits = std::to_string(n);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

struct Candidate {
  Scheme scheme;
  bool checkpointing;
};

int64_t total_of(const ModelDims& dims, const Candidate& c, config::OptimizerKind optimizer,
                 double momentum, int64_t micro_batch) {
  const auto m = estimate_memory(dims, c.scheme, optimizer, momentum, micro_batch);
  return c.checkpointing ? m.total_checkpointed() : m.total();
}

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> out;
  for (int64_t d = 1; d <= n; ++d) {
    if (n % d == 0) out.push_back(d);
  }
  return out;
}

// The largest divisor of global_batch that fits, 0 when not even 1 does.
int64_t largest_fitting(const ModelDims& dims, const Candidate& c, config::OptimizerKind optimizer,
                        double momentum, int64_t global_batch, int64_t budget) {
  int64_t best = 0;
  for (const int64_t b : divisors(global_batch)) {
    if (total_of(dims, c, optimizer, momentum, b) > budget) break;  // grows with b
    best = b;
  }
  return best;
}

std::string describe_model(const ModelDims& d) {
  switch (d.family) {
    case ModelDims::Family::gpt:
      return fmt::format("n_layer {}, n_embd {}, n_head {}, vocab_size {}, seq_len {}",
                         d.gpt.n_layer, d.gpt.n_embd, d.gpt.n_head, d.gpt.vocab_size, d.seq_len);
    case ModelDims::Family::mlp:
      return fmt::format("input {}, hidden {} x {} layers, classes {}", fmt::join(d.input_shape, "x"),
                         d.mlp_hidden, d.mlp_layers, d.classes);
    case ModelDims::Family::cnn:
      return fmt::format("input {}, channels {}, {} blocks per stage, classes {}",
                         fmt::join(d.input_shape, "x"), d.cnn_channels, d.cnn_blocks, d.classes);
  }
  return "";
}

}  // namespace

int64_t usable_bytes(const GpuTarget& gpu) {
  return static_cast<int64_t>(gpu.memory_gb * (1.0 - kFragmentation) * static_cast<double>(1 << 30)) -
         kContextBytes;
}

Recommendation recommend(const ModelDims& dims, config::OptimizerKind optimizer, double momentum,
                         int64_t global_batch, const GpuTarget& gpu) {
  const int64_t budget = usable_bytes(gpu);
  const std::string precision = gpu.compute_capability >= 8.0 ? "bf16" : "fp16";
  const bool can_checkpoint = dims.family == ModelDims::Family::gpt;
  std::vector<Candidate> candidates;
  for (const auto* level : {"O1", "O2"}) {
    candidates.push_back({{precision, level}, false});
    if (can_checkpoint) candidates.push_back({{precision, level}, true});
  }
  const int64_t wanted = std::min<int64_t>(8, global_batch);

  Recommendation r;
  std::optional<Candidate> chosen;
  int64_t chosen_batch = 0;
  for (const auto& c : candidates) {
    const int64_t b = largest_fitting(dims, c, optimizer, momentum, global_batch, budget);
    if (b >= wanted && !chosen_batch) {
      chosen = c;
      chosen_batch = b;
      break;
    }
    if (b > chosen_batch) {
      chosen = c;
      chosen_batch = b;
    }
  }
  const auto base = estimate_memory(dims, candidates.front().scheme, optimizer, momentum, 1);
  if (!chosen) {
    r.reasons.push_back(fmt::format(
        "Nothing fits: even a micro-batch of 1 needs more than the {:.1f} GiB usable under every "
        "precision and opt level; the weights, gradients and optimizer state alone take {:.1f} "
        "GiB in {}/O1. Use a GPU with more memory, or shard the model across GPUs (ZeRO/FSDP).",
        gib(budget), gib(base.persistent()), precision));
    return r;
  }
  r.fits = true;
  r.scheme = chosen->scheme;
  r.checkpointing = chosen->checkpointing;
  r.micro_batch = chosen_batch;
  r.grad_accum = global_batch / chosen_batch;
  r.estimate_bytes = total_of(dims, *chosen, optimizer, momentum, chosen_batch);

  if (precision == "bf16") {
    r.reasons.push_back(fmt::format(
        "bf16: compute capability {:.1f} has bf16 tensor cores; bf16 keeps fp32's exponent "
        "range, so there is no loss scaler and no skipped steps, at the same memory as fp16.",
        gpu.compute_capability));
  } else {
    r.reasons.push_back(fmt::format(
        "fp16 with the dynamic loss scaler: compute capability {:.1f} has no bf16 tensor cores "
        "(they start at 8.0).",
        gpu.compute_capability));
  }
  if (gpu.compute_capability >= 8.9 && dims.family == ModelDims::Family::gpt) {
    const Candidate fp8{{"fp8", "O1"}, r.checkpointing};
    r.reasons.push_back(fmt::format(
        "fp8 (--mixed_precision fp8) would run the blocks' Linear layers in e4m3 on this GPU, "
        "faster at about the same memory ({:.1f} GiB at this micro-batch); check its loss "
        "against bf16 with `ampt compare` first.",
        gib(total_of(dims, fp8, optimizer, momentum, chosen_batch))));
  }
  const auto o1 = estimate_memory(dims, {precision, "O1"}, optimizer, momentum, chosen_batch);
  const auto o2 = estimate_memory(dims, {precision, "O2"}, optimizer, momentum, chosen_batch);
  const double params = static_cast<double>(count_parameters(dims).total);
  if (r.scheme.opt_level == "O1") {
    r.reasons.push_back(fmt::format(
        "O1: fp32 weights with per-op casts ({:.0f} bytes per parameter with the cast copies) "
        "fit, without O2's second copy of the weights to keep consistent; O2 (half weights and "
        "gradients, fp32 masters: {:.0f} bytes per parameter) would save {:.1f} GiB at this "
        "micro-batch.",
        static_cast<double>(o1.persistent()) / params, static_cast<double>(o2.persistent()) / params,
        gib(o1.total() - o2.total())));
  } else {
    r.reasons.push_back(fmt::format(
        "O2: its half-precision activations ({:.1f} GiB less than O1 at this micro-batch) are what "
        "lets micro-batch {} fit; O1 fits at most {}.",
        gib(o1.activations - o2.activations), chosen_batch,
        largest_fitting(dims, {{precision, "O1"}, r.checkpointing}, optimizer, momentum,
                        global_batch, budget)));
  }
  if (can_checkpoint) {
    const int64_t without = largest_fitting(dims, {r.scheme, false}, optimizer, momentum,
                                            global_batch, budget);
    r.reasons.push_back(
        r.checkpointing
            ? fmt::format("Activation checkpointing (--grad_ckpt) on: without it only a "
                          "micro-batch of {} fits; recomputing each block costs about a third "
                          "more compute.",
                          without)
            : "Activation checkpointing off: the micro-batch fits without recomputation.");
  }
  const auto all = divisors(global_batch);
  const auto next = std::ranges::upper_bound(all, chosen_batch);
  r.reasons.push_back(fmt::format(
      "Micro-batch {}: the largest divisor of the global batch {} whose estimate ({:.1f} GiB) fits "
      "the {:.1f} GiB usable{}; gradient accumulation {} gives the global batch.",
      chosen_batch, global_batch, gib(r.estimate_bytes), gib(budget),
      next == all.end()
          ? ""
          : fmt::format(" ({} would need {:.1f} GiB)", *next,
                        gib(total_of(dims, *chosen, optimizer, momentum, *next))),
      r.grad_accum));
  return r;
}

std::string recommend_help() {
  return config::subcommand_help(
      "ampt recommend",
      "Usage: ampt recommend [--gpu_memory_gb GB] [--global_batch N] [TRAINING OPTIONS]...\n\n"
      "Estimates the training memory of the configured model (--model and its dimensions,\n"
      "--batch_size as the micro-batch, --optimizer) for each precision and opt level: weights,\n"
      "gradients, fp32 masters, optimizer state, cast copies and activations, with and without\n"
      "activation checkpointing; then recommends the precision, opt level, micro-batch and\n"
      "gradient accumulation for the global batch on the given GPU, and says why.",
      own_flags());
}

std::string run_recommend(const std::vector<std::string>& args,
                          const std::map<std::string, std::string>& env) {
  const auto split = config::split_subcommand_flags(args, own_flags());
  const auto resolved = config::resolve(split.rest, env);
  const auto& config = resolved.config();
  GpuTarget gpu;
  gpu.memory_gb = parse_number("gpu_memory_gb", split.values.at("gpu_memory_gb"), 0.0);
  gpu.compute_capability =
      parse_number("compute_capability", split.values.at("compute_capability"), 0.0);
  const auto& global_text = split.values.at("global_batch");
  const int64_t global_batch = global_text.empty() ? config.batch_size * config.grad_accum_steps
                                                   : parse_count("global_batch", global_text);
  const auto& seq_text = split.values.at("seq_len");
  const auto& shape_text = split.values.at("input_shape");
  const auto dims = model_dims(config, shape_text.empty() ? std::vector<int64_t>{} : parse_shape(shape_text),
                               seq_text.empty() ? 0 : parse_count("seq_len", seq_text));
  const int64_t usable = usable_bytes(gpu);
  if (usable <= 0) {
    throw UsageError(fmt::format("--gpu_memory_gb {} leaves nothing after the 1 GiB CUDA context",
                                 gpu.memory_gb));
  }

  const auto params = count_parameters(dims);
  std::string text = fmt::format(
      "Model {}: {} parameters ({}); optimizer {}\n"
      "GPU: {:.0f} GiB, compute capability {:.1f}; usable {:.1f} GiB = {:.0f} GiB x {:.2f} "
      "(allocator fragmentation) - 1 GiB (CUDA context, cuBLAS/cuDNN workspaces)\n\n"
      "Estimated peak memory in GiB at micro-batch {} (--batch_size):\n\n"
      "| precision/opt level | weights | gradients | fp32 masters | optimizer | cast copies | "
      "activations | total | with --grad_ckpt | fits |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n",
      dims.name, grouped(params.total), describe_model(dims),
      config.optimizer == config::OptimizerKind::adamw ? "adamw (2 fp32 states per parameter)"
                                                       : "sgd",
      gpu.memory_gb, gpu.compute_capability, gib(usable), gpu.memory_gb, 1.0 - kFragmentation,
      config.batch_size);
  for (const auto& scheme : memory_schemes()) {
    if (!scheme_applies(scheme, dims)) continue;
    const auto m = estimate_memory(dims, scheme, config.optimizer, config.momentum, config.batch_size);
    const bool fits = m.total() <= usable;
    const bool fits_ckpt = m.activations_checkpointed >= 0 && m.total_checkpointed() <= usable;
    text += fmt::format(
        "| {} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {} | {} |\n",
        scheme.name(), gib(m.weights), gib(m.gradients), gib(m.masters), gib(m.optimizer),
        gib(m.cast_copies), gib(m.activations), gib(m.total()),
        m.activations_checkpointed < 0 ? "–" : fmt::format("{:.2f}", gib(m.total_checkpointed())),
        fits ? "yes" : fits_ckpt ? "with --grad_ckpt" : "no");
  }

  const auto r = recommend(dims, config.optimizer, config.momentum, global_batch, gpu);
  if (r.fits) {
    // The user's own training flags (model, data ...) with the recommended settings in place of
    // theirs; YAML and environment settings still apply when the command runs.
    static const std::vector<config::SubcommandFlag> replaced = {
        {"batch_size", "N", "", ""},
        {"grad_accum_steps", "N", "", ""},
        {"mixed_precision", "P", "", ""},
        {"amp_opt_level", "L", "", ""}};
    std::string command = "ampt train";
    for (const auto& arg : config::split_subcommand_flags(split.rest, replaced).rest) {
      command += arg.find(' ') == std::string::npos ? " " + arg : " '" + arg + "'";
    }
    text += fmt::format(
        "\nRecommendation for a global batch of {}: {} {}, micro-batch {} x {} accumulation "
        "steps{}\n  {} --mixed_precision {} --amp_opt_level {} --batch_size {} "
        "--grad_accum_steps {}{}\n",
        global_batch, r.scheme.precision, r.scheme.opt_level, r.micro_batch, r.grad_accum,
        r.checkpointing ? ", activation checkpointing" : "", command, r.scheme.precision,
        r.scheme.opt_level, r.micro_batch, r.grad_accum, r.checkpointing ? " --grad_ckpt" : "");
  } else {
    text += fmt::format("\nNo setup fits a {:.0f} GiB GPU.\n", gpu.memory_gb);
  }
  text += "\nWhy:\n";
  for (const auto& reason : r.reasons) text += "- " + reason + "\n";
  return text;
}

}  // namespace ampt::train

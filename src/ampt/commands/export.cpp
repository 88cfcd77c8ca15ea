#include "ampt/commands/export.h"

#include "ampt/checkpoint/checkpoint.h"
#include "ampt/checkpoint/safetensors.h"
#include "ampt/commands/own_flags.h"
#include "ampt/commands/run_model.h"
#include "ampt/core/errors.h"
#include "ampt/data/run_tokenizer.h"
#include "ampt/hf/peft_adapter.h"
#include "ampt/models/lora.h"
#include "ampt/models/model_family.h"

#include <cxxopts.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <optional>

namespace ampt::commands {
namespace {

cxxopts::Options export_parser() {
  cxxopts::Options parser("ampt export", "Write a checkpoint's model weights for other tools.");
  parser.add_options()
      ("checkpoint", "checkpoint to read (a ckpt-*.pt file written by ampt train)",
       cxxopts::value<std::string>(), "PATH")
      ("out", "file to write (a directory with --format hf)", cxxopts::value<std::string>(), "FILE")
      ("format", "safetensors (one file of ampt's tensors), hf (a Hugging Face model directory) "
       "or peft (a LoRA run's adapters as a peft adapter directory)",
       cxxopts::value<std::string>()->default_value("safetensors"), "FORMAT")
      ("merge", "a LoRA run's adapters folded into their base: the whole model (with --format "
       "hf or safetensors)", cxxopts::value<bool>()->default_value("false"))
      ("tokenizer", "with --format hf: the tokenizer to write beside the model (default: the "
       "run's init_from files)", cxxopts::value<std::string>(), "PATH")
      ("dtype", "floating-point weights as fp32 or bf16", cxxopts::value<std::string>()->default_value("fp32"), "fp32|bf16")
      ("h,help", "show this help");
  parser.allow_unrecognised_options();
  return parser;
}

// The tokenizer written beside the model: export's --tokenizer, else the run's. A run's
// init_from directory that holds no tokenizer files (a bare model) gives none, as a run without
// a tokenizer does.
std::optional<std::string> export_tokenizer(const config::Config& config, const std::string& flag) {
  if (!flag.empty()) return flag;
  auto path = data::run_tokenizer_path(config);
  if (!path || !config.tokenizer.empty() || !std::filesystem::is_directory(*path)) return path;
  for (const auto& entry : std::filesystem::directory_iterator(*path)) {
    const auto name = entry.path().filename().string();
    if (name == "tokenizer.json" || name == "vocab.json" || name.ends_with(".tiktoken")) return path;
  }
  return std::nullopt;
}

void export_hf(const checkpoint::Checkpoint& saved, const std::string& checkpoint_path,
               const std::string& out, NamedTensors weights, const std::string& tokenizer_flag,
               const Environment& env) {
  const auto config = run_config(saved, {}, env);
  const auto& family = models::family_of(config);
  if (!family.hf_export) {
    throw UsageError(fmt::format("--format hf writes a Hugging Face model, and {} holds a {} "
                                 "model, which has none: use --format safetensors",
                                 checkpoint_path, config.model));
  }
  models::HfExport request{out, &config, std::move(weights), export_tokenizer(config, tokenizer_flag),
                           {{"format", "pt"},
                            {"ampt_version", saved.ampt_version},
                            {"ampt_git_revision", saved.git_revision},
                            {"step", std::to_string(saved.step)}}};
  if (!request.tokenizer_path) {
    fmt::print(stderr,
               "ampt: warning: the run of {} had no tokenizer (no --tokenizer, no init_from): {} gets none; add "
               "--tokenizer PATH for AutoTokenizer\n",
               checkpoint_path, out);
  }
  const auto written = family.write_hf(request);
  fmt::print("wrote {}: {} from {} (step {})\n", out, written, checkpoint_path, saved.step);
}

// The formats a checkpoint can go to: a LoRA run's holds only its adapters.
void check_format(const std::string& format, bool merge, bool lora, const std::string& path) {
  if (merge && !lora) {
    throw UsageError(fmt::format("--merge folds LoRA adapters into their base, and {} holds a "
                                 "full model: leave --merge out",
                                 path));
  }
  if (merge && format == "peft") {
    throw UsageError("--merge writes the whole model (--format hf or safetensors); --format peft "
                     "writes the adapters alone");
  }
  if (format == "peft" && !lora) {
    throw UsageError(fmt::format("--format peft writes LoRA adapters, and {} holds a full model "
                                 "(trained without --lora_rank): use --format hf or safetensors",
                                 path));
  }
  if (format == "hf" && lora && !merge) {
    throw UsageError(fmt::format("{} holds LoRA adapters only: --format peft writes them for "
                                 "peft, --format hf --merge folds them into their base",
                                 path));
  }
}

void export_peft(const checkpoint::Checkpoint& saved, const std::string& checkpoint_path,
                 const std::string& out, const NamedTensors& weights, const Environment& env) {
  const auto config = run_config(saved, {}, env);
  const auto& family = models::family_of(config);
  hf::write_peft_adapter(out, weights, family.hf_module_prefix,
                         {config.init_from, config.lora_rank, config.lora_alpha,
                          config.lora_dropout, models::lora_targets_of(config, family.lora_targets)},
                         family.hf_transposed,
                         {{"format", "pt"},
                          {"ampt_version", saved.ampt_version},
                          {"ampt_git_revision", saved.git_revision},
                          {"step", std::to_string(saved.step)}});
  fmt::print("wrote {}: adapter_model.safetensors ({} tensors), adapter_config.json from {} "
             "(step {})\n",
             out, weights.size(), checkpoint_path, saved.step);
}

// The base with the checkpoint's adapters folded in, and its buffers.
NamedTensors merged_weights(const checkpoint::Checkpoint& saved, const std::string& checkpoint_path,
                            const Environment& env) {
  const auto config = run_config(saved, {}, env);
  const auto model = load_run_model(config, saved, checkpoint_path, torch::kCPU);
  auto weights = models::merged_lora_weights(*model.module);
  for (const auto& item : model.module->named_buffers()) weights.emplace_back(item.key(), item.value());
  return weights;
}

}  // namespace

std::string export_help() { return export_parser().help(); }

int run_export(const std::vector<std::string>& args, const Environment& env) {
  auto parser = export_parser();
  const auto result =
      parse_own_flags(parser, "export", args,
                      {"--checkpoint", "--out", "--format", "--dtype", "--tokenizer", "--merge"});
  const auto checkpoint_path = required_flag(result, "export", "checkpoint");
  const auto out = required_flag(result, "export", "out");
  const auto format = result["format"].as<std::string>();
  if (format != "safetensors" && format != "hf" && format != "peft") {
    throw UsageError("invalid value '" + format +
                     "' for --format: expected one of safetensors, hf, peft");
  }
  const bool merge = result["merge"].as<bool>();
  const auto tokenizer = result.count("tokenizer") != 0 ? result["tokenizer"].as<std::string>() : "";
  if (!tokenizer.empty() && format != "hf") {
    throw UsageError("--tokenizer goes with --format hf (a safetensors file holds tensors only)");
  }
  const auto dtype = result["dtype"].as<std::string>();
  if (dtype != "fp32" && dtype != "bf16") {
    throw UsageError("invalid value '" + dtype + "' for --dtype: expected one of fp32, bf16");
  }

  const auto saved = checkpoint::load(checkpoint_path);
  check_format(format, merge, !saved.base_fingerprint.empty(), checkpoint_path);
  NamedTensors weights;
  for (const auto& [name, tensor] : merge ? merged_weights(saved, checkpoint_path, env) : saved.model) {
    // Integer buffers (BatchNorm's batch counter) keep their type.
    const bool cast = dtype == "bf16" && tensor.is_floating_point();
    weights.emplace_back(name, cast ? tensor.to(torch::kBFloat16) : tensor);
  }
  if (format == "hf") {
    export_hf(saved, checkpoint_path, out, std::move(weights), tokenizer, env);
    return 0;
  }
  if (format == "peft") {
    export_peft(saved, checkpoint_path, out, weights, env);
    return 0;
  }
  checkpoint::write_safetensors(out, weights,
                    {{"format", "pt"},
                     {"ampt_version", saved.ampt_version},
                     {"ampt_git_revision", saved.git_revision},
                     {"step", std::to_string(saved.step)}});
  fmt::print("wrote {} tensors ({}) from {} (step {}) to {}\n", weights.size(), dtype,
             checkpoint_path, saved.step, out);
  return 0;
}

}  // namespace ampt::commands

#include "ampt/commands/export.h"

#include "ampt/checkpoint/checkpoint.h"
#include "ampt/checkpoint/safetensors.h"
#include "ampt/commands/run_model.h"
#include "ampt/config/command_flags.h"
#include "ampt/core/errors.h"
#include "ampt/data/run_tokenizer.h"
#include "ampt/hf/export_directory.h"
#include "ampt/hf/hub_cache.h"
#include "ampt/hf/peft_adapter.h"
#include "ampt/models/lora.h"
#include "ampt/models/model_family.h"
#include "ampt/text/tokenizer_files.h"

#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <utility>
#include <vector>

namespace ampt::commands {
namespace {

// What export takes: no training option, the checkpoint holds its run's.
struct ExportSettings {
  std::string checkpoint;
  std::string out;
  std::string format = "safetensors";
  bool merge = false;
  std::string tokenizer;
  std::string dtype = "fp32";
};

const config::FlagTable<ExportSettings>& export_flags() {
  using S = ExportSettings;
  using config::flag_only;
  static const config::FlagTable<S> table = {
      config::required(flag_only(config::string_option(
          "checkpoint", "", &S::checkpoint, true, "PATH",
          "Checkpoint to read (a ckpt-*.pt file or a sharded ckpt-* directory written by ampt "
          "train)"))),
      config::required(flag_only(config::string_option(
          "out", "", &S::out, true, "PATH",
          "File to write (a directory with --format hf or peft), under a temporary name and "
          "renamed into place whole: a failure leaves it as it was, an earlier export is "
          "replaced"))),
      flag_only(config::choice_option(
          "format", "", &S::format, {"safetensors", "hf", "peft"},
          "safetensors (one file of ampt's tensors), hf (a Hugging Face model directory) or peft "
          "(a LoRA run's adapters as a peft adapter directory)")),
      flag_only(config::bool_option("merge", "", &S::merge,
                                    "A LoRA run's adapters folded into their base: the whole model "
                                    "(with --format hf or safetensors)")),
      flag_only(config::string_option("tokenizer", "", &S::tokenizer, false, "PATH",
                                      "With --format hf: the tokenizer to write beside the model "
                                      "(default: the run's own)")),
      flag_only(config::choice_option("dtype", "", &S::dtype, {"fp32", "bf16"},
                                      "Floating-point weights as fp32 or bf16")),
  };
  return table;
}

// What the weights' safetensors header records of where they came from.
std::map<std::string, std::string> export_metadata(const checkpoint::Checkpoint& saved) {
  return {{"format", "pt"},
          {"ampt_version", saved.ampt_version},
          {"ampt_git_revision", saved.git_revision},
          {"step", std::to_string(saved.step)}};
}

// The tokenizer written beside the model: export's --tokenizer, else the run's. A run's
// init_from directory that holds no tokenizer files (a bare model) gives none, as a run without
// a tokenizer does.
std::optional<std::string> export_tokenizer(const config::Config& config, const std::string& flag) {
  if (!flag.empty()) return flag;
  auto path = data::run_tokenizer_path(config);
  if (!path || !config.tokenizer.empty() || !std::filesystem::is_directory(*path)) return path;
  if (text::holds_tokenizer(*path)) return path;
  return std::nullopt;
}

// An export replaces --out whole (hf/export_directory.h): never with what the run was trained
// from, which a LoRA checkpoint still needs and a tokenizer's copy would be made of.
void check_out_is_no_input(const std::string& out, const config::Config& config,
                           const std::optional<std::string>& tokenizer) {
  namespace fs = std::filesystem;
  std::vector<std::pair<std::string, std::string>> inputs;
  if (!config.init_from.empty()) {
    try {
      inputs.emplace_back("init_from", hf::pretrained_dir(config.init_from, config.hf_hub_cache));
    } catch (const RuntimeError&) {
      // A base no longer there cannot be replaced.
    }
  }
  if (tokenizer) {
    std::error_code error;
    inputs.emplace_back("tokenizer", fs::is_directory(*tokenizer, error)
                                         ? *tokenizer
                                         : fs::path(*tokenizer).parent_path().string());
  }
  for (const auto& [what, input] : inputs) {
    std::error_code error;
    if (fs::equivalent(out, input.empty() ? "." : input, error)) {
      throw UsageError(fmt::format("--out {} is the run's {} directory ({}): an export replaces its "
                                   "directory whole; name a new one",
                                   out, what, input));
    }
  }
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
  auto tokenizer = export_tokenizer(config, tokenizer_flag);
  check_out_is_no_input(out, config, tokenizer);
  models::HfExport request{out, &config, std::move(weights), std::move(tokenizer),
                           export_metadata(saved)};
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
  check_out_is_no_input(out, config, std::nullopt);
  hf::write_peft_adapter(out, weights, family.hf_module_prefix,
                         {config.init_from, config.lora_rank, config.lora_alpha,
                          config.lora_dropout, models::lora_targets_of(config, family.lora_targets)},
                         family.hf_transposed,
                         export_metadata(saved));
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

std::vector<config::FlagReference> export_flag_references() {
  return config::flag_references(export_flags());
}

std::string export_help() {
  return config::command_help("export",
                              "Usage: ampt export --checkpoint PATH --out PATH [--format "
                              "safetensors|hf|peft] [FLAGS]\n\n"
                              "Write a checkpoint's model weights for other tools.",
                              export_flag_references(), nullptr);
}

int run_export(const std::vector<std::string>& args, const Environment& env) {
  const auto flags = config::parse_command_flags("export", export_flags(), args);
  const auto& checkpoint_path = flags.checkpoint;
  const auto& out = flags.out;
  const auto& format = flags.format;
  const bool merge = flags.merge;
  const auto& tokenizer = flags.tokenizer;
  if (!tokenizer.empty() && format != "hf") {
    throw UsageError("--tokenizer goes with --format hf (a safetensors file holds tensors only)");
  }
  const auto& dtype = flags.dtype;

  // Before the checkpoint is read: what it would replace.
  if (format != "safetensors") hf::check_replaceable(out);
  const auto saved = checkpoint::load(checkpoint_path);
  check_format(format, merge, !saved.base_fingerprint.empty(), checkpoint_path);
  NamedTensors weights;
  for (const auto& [name, tensor] : merge ? merged_weights(saved, checkpoint_path, env) : saved.model) {
    // Integer buffers (BatchNorm's batch counter) keep their type.
    const bool cast = dtype == "bf16" && tensor.is_floating_point();
    weights.emplace_back(name, cast ? tensor.to(torch::kBFloat16) : tensor);
  }
  // Every writer builds its file or directory under a temporary name and renames it into place
  // (checkpoint/atomic_file.h, atomic_directory.h): a failure leaves --out as it was.
  try {
    if (format == "hf") {
      export_hf(saved, checkpoint_path, out, std::move(weights), tokenizer, env);
    } else if (format == "peft") {
      export_peft(saved, checkpoint_path, out, weights, env);
    } else {
      checkpoint::write_safetensors(out, weights, export_metadata(saved));
      fmt::print("wrote {} tensors ({}) from {} (step {}) to {}\n", weights.size(), dtype,
                 checkpoint_path, saved.step, out);
    }
  } catch (const RuntimeError& e) {
    throw RuntimeError(fmt::format("export to {} failed and left it as it was: {}", out, e.what()));
  }
  return 0;
}

}  // namespace ampt::commands

#include "ampt/commands/export.h"

#include "ampt/checkpoint/checkpoint.h"
#include "ampt/checkpoint/safetensors.h"
#include "ampt/commands/own_flags.h"
#include "ampt/commands/run_model.h"
#include "ampt/core/errors.h"
#include "ampt/data/run_tokenizer.h"
#include "ampt/models/model_family.h"

#include <cxxopts.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <optional>

namespace ampt::commands {
namespace {

cxxopts::Options make_parser() {
  cxxopts::Options parser("ampt export", "Write a checkpoint's model weights for other tools.");
  parser.add_options()
      ("checkpoint", "checkpoint to read (a ckpt-*.pt file written by ampt train)",
       cxxopts::value<std::string>(), "PATH")
      ("out", "file to write (a directory with --format hf)", cxxopts::value<std::string>(), "FILE")
      ("format", "safetensors (one file of ampt's tensors) or hf (a Hugging Face model directory)",
       cxxopts::value<std::string>()->default_value("safetensors"), "FORMAT")
      ("tokenizer", "with --format hf: the tokenizer to write beside the model (default: the "
       "run's init_from files)", cxxopts::value<std::string>(), "PATH")
      ("dtype", "floating-point weights as fp32 or bf16", cxxopts::value<std::string>()->default_value("fp32"), "fp32|bf16")
      ("h,help", "show this help");
  parser.allow_unrecognised_options();
  return parser;
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
  models::HfExport request{out, &config, std::move(weights),
                           tokenizer_flag.empty() ? data::run_tokenizer_path(config)
                                                  : std::optional<std::string>(tokenizer_flag),
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

}  // namespace

std::string export_help() { return make_parser().help(); }

int run_export(const std::vector<std::string>& args, const Environment& env) {
  auto parser = make_parser();
  const auto result =
      parse_own_flags(parser, "export", args, {"--checkpoint", "--out", "--format", "--dtype", "--tokenizer"});
  const auto checkpoint_path = required_flag(result, "export", "checkpoint");
  const auto out = required_flag(result, "export", "out");
  const auto format = result["format"].as<std::string>();
  if (format != "safetensors" && format != "hf") {
    throw UsageError("invalid value '" + format + "' for --format: expected one of safetensors, hf");
  }
  const auto tokenizer = result.count("tokenizer") != 0 ? result["tokenizer"].as<std::string>() : "";
  if (!tokenizer.empty() && format != "hf") {
    throw UsageError("--tokenizer goes with --format hf (a safetensors file holds tensors only)");
  }
  const auto dtype = result["dtype"].as<std::string>();
  if (dtype != "fp32" && dtype != "bf16") {
    throw UsageError("invalid value '" + dtype + "' for --dtype: expected one of fp32, bf16");
  }

  const auto saved = checkpoint::load(checkpoint_path);
  NamedTensors weights;
  for (const auto& [name, tensor] : saved.model) {
    // Integer buffers (BatchNorm's batch counter) keep their type.
    const bool cast = dtype == "bf16" && tensor.is_floating_point();
    weights.emplace_back(name, cast ? tensor.to(torch::kBFloat16) : tensor);
  }
  if (format == "hf") {
    export_hf(saved, checkpoint_path, out, std::move(weights), tokenizer, env);
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

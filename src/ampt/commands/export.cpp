#include "ampt/commands/export.h"

#include "ampt/checkpoint/checkpoint.h"
#include "ampt/checkpoint/safetensors.h"
#include "ampt/commands/own_flags.h"
#include "ampt/core/errors.h"

#include <cxxopts.hpp>
#include <fmt/format.h>

namespace ampt::commands {
namespace {

cxxopts::Options make_parser() {
  cxxopts::Options parser("ampt export", "Write a checkpoint's model weights for other tools.");
  parser.add_options()
      ("checkpoint", "checkpoint to read (a ckpt-*.pt file written by ampt train)",
       cxxopts::value<std::string>(), "PATH")
      ("out", "file to write", cxxopts::value<std::string>(), "FILE")
      ("format", "output format: safetensors", cxxopts::value<std::string>()->default_value("safetensors"), "FORMAT")
      ("dtype", "floating-point weights as fp32 or bf16", cxxopts::value<std::string>()->default_value("fp32"), "fp32|bf16")
      ("h,help", "show this help");
  parser.allow_unrecognised_options();
  return parser;
}

}  // namespace

std::string export_help() { return make_parser().help(); }

int run_export(const std::vector<std::string>& args, const Environment&) {
  auto parser = make_parser();
  const auto result =
      parse_own_flags(parser, "export", args, {"--checkpoint", "--out", "--format", "--dtype"});
  const auto checkpoint_path = required_flag(result, "export", "checkpoint");
  const auto out = required_flag(result, "export", "out");
  const auto format = result["format"].as<std::string>();
  if (format != "safetensors") {
    throw UsageError("invalid value '" + format + "' for --format: expected safetensors");
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

#include "ampt/hf/gpt2_export.h"

#include "ampt/checkpoint/safetensors.h"
#include "ampt/core/errors.h"
#include "ampt/hf/gpt2_weights.h"
#include "ampt/text/hf_tokenizer_writer.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace ampt::hf {

void write_gpt2_directory(const std::string& dir, const NamedTensors& weights,
                          const Gpt2Config& config, const DeclaredLinears& linears,
                          const text::Vocabulary* tokenizer,
                          const std::map<std::string, std::string>& metadata) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error || !std::filesystem::is_directory(dir)) {
    throw RuntimeError(fmt::format("{}: cannot create the directory: {}", dir,
                                   error ? error.message() : "a file is in the way"));
  }
  // The tensors first: a name or shape that does not fit leaves no half-written directory.
  const auto tensors = to_gpt2_tensors(weights, config, linears);
  checkpoint::write_safetensors(dir + "/model.safetensors", tensors, metadata);
  const std::string config_path = dir + "/config.json";
  std::ofstream out(config_path, std::ios::binary | std::ios::trunc);
  out << gpt2_config_json(config);
  out.close();
  if (!out) throw RuntimeError(fmt::format("{}: cannot write: {}", config_path, std::strerror(errno)));
  if (tokenizer != nullptr) text::write_hf_tokenizer(*tokenizer, dir, config.n_positions);
}

}  // namespace ampt::hf

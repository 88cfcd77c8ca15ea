#include "ampt/hf/llama_export.h"

#include "ampt/checkpoint/atomic_file.h"
#include "ampt/core/errors.h"
#include "ampt/hf/llama_weights.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

namespace ampt::hf {
namespace {

namespace fs = std::filesystem;

bool is_file(const fs::path& path) {
  std::error_code error;
  return fs::is_regular_file(path, error);
}

}  // namespace

std::vector<std::string> tokenizer_files(const std::string& tokenizer_path) {
  const fs::path path(tokenizer_path);
  std::error_code error;
  const fs::path dir = fs::is_directory(path, error) ? path : path.parent_path();
  std::vector<std::string> files;
  if (!fs::is_directory(path, error)) files.push_back(path.string());
  for (const auto* name : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"}) {
    const auto candidate = (dir / name).string();
    if (is_file(candidate) && std::ranges::find(files, candidate) == files.end()) files.push_back(candidate);
  }
  if (fs::is_directory(path, error)) {
    for (const auto& entry : fs::directory_iterator(path, error)) {
      if (entry.path().extension() == ".tiktoken" && is_file(entry.path())) files.push_back(entry.path().string());
    }
  }
  return files;
}

std::vector<std::string> write_llama_directory(const std::string& dir, const NamedTensors& weights,
                                               const LlamaConfig& config,
                                               const DeclaredLinears& linears,
                                               const std::optional<std::string>& tokenizer_path,
                                               const std::map<std::string, std::string>& metadata,
                                               int64_t max_shard_bytes) {
  std::error_code error;
  fs::create_directories(dir, error);
  if (error || !fs::is_directory(dir)) {
    throw RuntimeError(fmt::format("{}: cannot create the directory: {}", dir,
                                   error ? error.message() : "a file is in the way"));
  }
  // The tensors first: a name or shape that does not fit leaves no half-written directory.
  const auto tensors = to_llama_tensors(weights, config, linears);
  auto written = write_safetensors_shards(dir, tensors, metadata, max_shard_bytes);
  checkpoint::write_file_atomically(dir + "/config.json", llama_config_json(config));
  written.push_back("config.json");
  if (!tokenizer_path) return written;
  for (const auto& file : tokenizer_files(*tokenizer_path)) {
    const auto target = fs::path(dir) / fs::path(file).filename();
    if (fs::exists(target) && fs::equivalent(file, target, error)) continue;
    fs::copy_file(file, target, fs::copy_options::overwrite_existing, error);
    if (error) throw RuntimeError(fmt::format("{}: cannot copy to {}: {}", file, target.string(), error.message()));
    written.push_back(target.filename().string());
  }
  return written;
}

}  // namespace ampt::hf

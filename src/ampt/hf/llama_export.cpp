#include "ampt/hf/llama_export.h"

#include "ampt/checkpoint/atomic_file.h"
#include "ampt/hf/export_directory.h"
#include "ampt/hf/llama_weights.h"

namespace ampt::hf {

std::vector<std::string> write_llama_directory(const std::string& dir, const NamedTensors& weights,
                                               const LlamaConfig& config,
                                               const DeclaredLinears& linears,
                                               const ExportTokenizer* tokenizer,
                                               const std::map<std::string, std::string>& metadata,
                                               int64_t max_shard_bytes) {
  // The tensors first: a name or shape that does not fit fails before any file is written.
  const auto tensors = to_llama_tensors(weights, config, linears);
  ExportDirectory out(dir);
  auto written = write_safetensors_shards(out.path(), tensors, metadata, max_shard_bytes);
  checkpoint::write_file_atomically(out.path() + "/config.json", llama_config_json(config));
  written.push_back("config.json");
  if (tokenizer != nullptr) {
    for (auto& name : write_tokenizer_files(*tokenizer, out.path(), config.block_size)) {
      written.push_back(std::move(name));
    }
  }
  out.commit();
  return written;
}

}  // namespace ampt::hf

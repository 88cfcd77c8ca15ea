#include "ampt/hf/gpt2_export.h"

#include "ampt/checkpoint/atomic_file.h"
#include "ampt/checkpoint/safetensors.h"
#include "ampt/hf/export_directory.h"
#include "ampt/hf/gpt2_weights.h"

namespace ampt::hf {

std::vector<std::string> write_gpt2_directory(const std::string& dir, const NamedTensors& weights,
                                              const Gpt2Config& config, const DeclaredLinears& linears,
                                              const ExportTokenizer* tokenizer,
                                              const std::map<std::string, std::string>& metadata) {
  // The tensors first: a name or shape that does not fit fails before any file is written.
  const auto tensors = to_gpt2_tensors(weights, config, linears);
  ExportDirectory out(dir);
  checkpoint::write_safetensors(out.path() + "/model.safetensors", tensors, metadata);
  checkpoint::write_file_atomically(out.path() + "/config.json", gpt2_config_json(config));
  std::vector<std::string> written{"config.json", "model.safetensors"};
  if (tokenizer != nullptr) {
    for (auto& name : write_tokenizer_files(*tokenizer, out.path(), config.n_positions)) {
      written.push_back(std::move(name));
    }
  }
  out.commit();
  return written;
}

}  // namespace ampt::hf

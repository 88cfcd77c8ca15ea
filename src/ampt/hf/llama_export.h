// A Llama or Qwen2 handed back to Hugging Face: the directory save_pretrained writes, which
// AutoModelForCausalLM.from_pretrained and AutoTokenizer.from_pretrained load.
#pragma once

#include "ampt/core/named_tensors.h"
#include "ampt/hf/llama_config.h"
#include "ampt/hf/safetensors_shards.h"
#include "ampt/hf/tokenizer_export.h"

#include <map>
#include <string>
#include <vector>

namespace ampt::hf {

// Writes the directory `dir` whole (export_directory.h: an earlier export there is replaced,
// nothing is left on a failure): the weights (to_llama_tensors of ampt's `weights` and the
// family's `linears`, sharded past `max_shard_bytes`) with `metadata`, config.json, and, given a
// `tokenizer`, its files (tokenizer_export.h). Returns the names written. Throws RuntimeError
// naming the file or the tensor.
std::vector<std::string> write_llama_directory(const std::string& dir, const NamedTensors& weights,
                                               const LlamaConfig& config,
                                               const DeclaredLinears& linears,
                                               const ExportTokenizer* tokenizer,
                                               const std::map<std::string, std::string>& metadata,
                                               int64_t max_shard_bytes = kMaxShardBytes);

}  // namespace ampt::hf

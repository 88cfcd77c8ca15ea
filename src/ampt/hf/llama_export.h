// A Llama or Qwen2 handed back to Hugging Face: the directory save_pretrained writes, which
// AutoModelForCausalLM.from_pretrained and AutoTokenizer.from_pretrained load.
#pragma once

#include "ampt/core/named_tensors.h"
#include "ampt/hf/llama_config.h"
#include "ampt/hf/safetensors_shards.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ampt::hf {

// The tokenizer files of `tokenizer_path` (a directory, or a tokenizer.json or *.tiktoken file
// with its siblings) that AutoTokenizer reads: tokenizer.json, tokenizer_config.json,
// special_tokens_map.json, and *.tiktoken rank files.
std::vector<std::string> tokenizer_files(const std::string& tokenizer_path);

// Creates `dir` when needed and writes the weights (to_llama_tensors of ampt's `weights` and the
// family's `linears`, sharded
// past `max_shard_bytes`) with `metadata`, config.json, and copies of `tokenizer_path`'s
// tokenizer files. Returns the names written. Throws RuntimeError naming the file or the tensor.
std::vector<std::string> write_llama_directory(const std::string& dir, const NamedTensors& weights,
                                               const LlamaConfig& config,
                                               const DeclaredLinears& linears,
                                               const std::optional<std::string>& tokenizer_path,
                                               const std::map<std::string, std::string>& metadata,
                                               int64_t max_shard_bytes = kMaxShardBytes);

}  // namespace ampt::hf

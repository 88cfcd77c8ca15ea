// A model handed back to Hugging Face: the directory transformers' save_pretrained writes, which
// GPT2LMHeadModel.from_pretrained and AutoTokenizer.from_pretrained load.
#pragma once

#include "ampt/core/named_tensors.h"
#include "ampt/hf/gpt2_config.h"
#include "ampt/hf/pretrained.h"
#include "ampt/hf/tokenizer_export.h"

#include <map>
#include <string>
#include <vector>

namespace ampt::hf {

// Writes the directory `dir` whole (export_directory.h: an earlier export there is replaced,
// nothing is left on a failure): model.safetensors (to_gpt2_tensors of ampt's `weights` and the
// family's `linears`: HF names, Conv1D layout, config.vocab_size rows) with `metadata`,
// config.json, and, given a `tokenizer`, its files (tokenizer_export.h). Returns the names
// written. Throws RuntimeError naming the file or the tensor that fails.
std::vector<std::string> write_gpt2_directory(const std::string& dir, const NamedTensors& weights,
                                              const Gpt2Config& config, const DeclaredLinears& linears,
                                              const ExportTokenizer* tokenizer,
                                              const std::map<std::string, std::string>& metadata);

}  // namespace ampt::hf

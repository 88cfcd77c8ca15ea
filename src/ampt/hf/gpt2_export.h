// A model handed back to Hugging Face: the directory transformers' save_pretrained writes, which
// GPT2LMHeadModel.from_pretrained and AutoTokenizer.from_pretrained load.
#pragma once

#include "ampt/core/named_tensors.h"
#include "ampt/hf/gpt2_config.h"
#include "ampt/hf/pretrained.h"
#include "ampt/text/vocabulary.h"

#include <map>
#include <string>

namespace ampt::hf {

// Creates `dir` when needed and writes config.json, model.safetensors (to_gpt2_tensors of ampt's
// `weights` and the family's `linears`: HF names, Conv1D layout, config.vocab_size rows) with `metadata`, and, given a
// `tokenizer`, its files (text/hf_tokenizer_writer.h). Existing files of those names are
// replaced. Throws RuntimeError naming the file or the tensor that fails.
void write_gpt2_directory(const std::string& dir, const NamedTensors& weights,
                          const Gpt2Config& config, const DeclaredLinears& linears,
                          const text::Vocabulary* tokenizer,
                          const std::map<std::string, std::string>& metadata);

}  // namespace ampt::hf

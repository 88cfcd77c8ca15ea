// GPT presets and the rule by which the dimension options override them.
#pragma once

#include "ampt/config/config.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ampt::models {

struct GptDims {
  int64_t n_layer = 0;
  int64_t n_embd = 0;
  int64_t n_head = 0;
  int64_t block_size = 0;  // context length
  int64_t vocab_size = 0;
  double dropout = 0.0;
};

struct GptPreset {
  std::string name;  // the --model value
  GptDims dims;
};

// gpt-tiny, gpt2-124m, gpt2-350m: the GPT-2 sizes use 50304 = 50257 rounded up to a multiple of
// 64, as llm.c and nanoGPT do, so that the head matmul maps onto whole tensor-core tiles.
const std::vector<GptPreset>& gpt_presets();

// True for every --model value that builds a GPT: "gpt" and the preset names.
bool is_gpt(const std::string& model);

// The dimensions of `config.model`: each of n_layer, n_embd, n_head, block_size and vocab_size
// is the option's value when it is non-zero and the preset's otherwise ("gpt" has gpt-tiny's
// values); dropout is always the option's. Throws UsageError when n_embd is not a multiple of
// n_head, and std::invalid_argument when `config.model` is not a GPT (a programming error).
GptDims resolve_gpt_dims(const config::Config& config);

}  // namespace ampt::models

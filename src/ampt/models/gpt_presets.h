// GPT presets and the rule by which the dimension options override them.
#pragma once

#include "ampt/config/config.h"
#include "ampt/hf/gpt2_config.h"
#include "ampt/models/layer_inventory.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ampt::models {

struct GptDims {
  int64_t n_layer = 0;
  int64_t n_embd = 0;
  int64_t n_head = 0;
  int64_t block_size = 0;  // context length: the position embedding's rows
  int64_t vocab_size = 0;  // the token embedding's rows (the head's outputs)
  double dropout = 0.0;
  // Of vocab_size, the ids that are real tokens; the rest pad the embedding to a multiple of 64
  // for the tensor cores and never enter the softmax. 0: all of them.
  int64_t valid_vocab = 0;
  double layer_norm_eps = 1e-5;
  bool tanh_gelu = true;  // GPT-2's GELU; false: the exact (erf) one

  int64_t real_vocab() const { return valid_vocab > 0 ? valid_vocab : vocab_size; }
};

struct GptPreset {
  std::string name;  // the --model value
  GptDims dims;
};

// gpt-tiny, then GPT-2 small, medium, large and XL (gpt2-124m, gpt2-350m, gpt2-774m, gpt2-1558m:
// Hugging Face's gpt2, gpt2-medium, gpt2-large, gpt2-xl). The GPT-2 sizes use 50304 = 50257
// rounded up to a multiple of 64, as llm.c and nanoGPT do, so that the head matmul maps onto
// whole tensor-core tiles.
const std::vector<GptPreset>& gpt_presets();

// True for every --model value that builds a GPT: "gpt" and the preset names.
bool is_gpt(const std::string& model);

// The dimensions of `config.model`: each of n_layer, n_embd, n_head, block_size and vocab_size
// is the option's value when it is non-zero and the preset's otherwise ("gpt" has gpt-tiny's
// values); dropout is always the option's. With config.init_from, the pretrained model's
// config.json decides instead (hf/gpt2_config.h): its vocabulary padded to a multiple of 64, its
// n_positions the block_size, its epsilon and GELU; an option that contradicts it (block_size
// may be smaller: the windows trained on) is a UsageError naming both. Throws UsageError when
// n_embd is not a multiple of n_head, and std::invalid_argument when `config.model` is not a GPT
// (a programming error).
GptDims resolve_gpt_dims(const config::Config& config);

// The token windows a GPT of `config` trains on: block_size when set, else the model's context.
int64_t gpt_window(const config::Config& config, const GptDims& dims);

// The blocks h.0 ... and each one's Linear layers, attn.c_attn [C → 3C], attn.c_proj, mlp.c_fc
// [C → 4C] and mlp.c_proj, all with biases, the MLP's two paired for fp8 (one fused operation);
// the head is the tied wte, [C → vocab_size].
LayerInventory layer_inventory(const GptDims& dims);
// The block Linears of the GPT-2 a Hugging Face config.json describes, as the weight files hold
// them (layer_inventory's names and shapes).
hf::DeclaredLinears declared_linears(const hf::Gpt2Config& config);

// The vocabulary rounded up to a multiple of 64 (50257 → 50304), as llm.c and nanoGPT pad it.
int64_t padded_vocab(int64_t vocab);

}  // namespace ampt::models

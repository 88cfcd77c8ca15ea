// A Hugging Face GPT-2's config.json: the architecture ampt builds to load its weights, and the
// file ampt writes when it hands a model back.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace ampt::hf {

struct Gpt2Config {
  int64_t n_layer = 0;
  int64_t n_embd = 0;
  int64_t n_head = 0;
  int64_t n_positions = 0;
  int64_t vocab_size = 0;
  double layer_norm_epsilon = 1e-5;
  // GELU as GPT-2 trained it: "gelu_new" (the tanh approximation, GPT-2's own), also spelt
  // "gelu_pytorch_tanh", or the exact "gelu".
  std::string activation_function = "gelu_new";
  // <|endoftext|>, GPT-2's first and last token; none for a model without a tokenizer.
  std::optional<int64_t> bos_token_id = 50256;
  std::optional<int64_t> eos_token_id = 50256;

  // Whether the activation is the tanh approximation (else the exact erf GELU).
  bool tanh_gelu() const { return activation_function != "gelu"; }
};

// Reads `path`. A file that is not JSON, lacks one of the dimensions, or asks for something
// ampt's GPT does not do (another model_type or activation, n_inner other than 4 * n_embd,
// cross-attention, layer-scaled or upcast attention) is one RuntimeError line naming the file,
// the key and what is allowed.
Gpt2Config read_gpt2_config(const std::string& path);

// config.json text that transformers' GPT2Config.from_pretrained reads back to `config`.
std::string gpt2_config_json(const Gpt2Config& config);

}  // namespace ampt::hf

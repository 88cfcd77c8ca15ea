// A Hugging Face config.json of the Llama architecture's families (LlamaForCausalLM,
// Qwen2ForCausalLM, Qwen3ForCausalLM, MistralForCausalLM, Qwen3MoeForCausalLM,
// MixtralForCausalLM): the architecture ampt builds to load its weights, and the file it writes
// when it hands one back. Qwen2 is Llama with biases on q/k/v; Qwen3 adds an RMSNorm over each
// query and key head before the rotation and a head_dim of its own (128 unless given); Mistral is
// Llama without biases, its sliding window refused. Qwen3-MoE is Qwen3's attention (head_dim
// hidden / heads unless given) with experts in every decoder_sparse_step-th block not in
// mlp_only_layers; Mixtral is Mistral with experts in every block, intermediate_size their width.
// Both
// spellings of rotary settings are read: transformers 5's `rope_parameters` and the hub's older
// `rope_theta` + `rope_scaling`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ampt::hf {

// Llama-3's frequency-dependent stretch of the rotary wavelengths (rope_type "llama3").
struct Llama3Scaling {
  double factor = 8.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
};

struct LlamaConfig {
  // "llama", "qwen2", "qwen3", "mistral", "qwen3_moe" or "mixtral"
  std::string model_type = "llama";
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_size = 0;  // config.json's head_dim; 0: hidden_size / num_attention_heads
  int64_t max_position_embeddings = 0;
  int64_t vocab_size = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  std::optional<Llama3Scaling> llama3_scaling;  // none: plain rotary (rope_type "default")
  // Biases on the q, k and v projections (Llama's attention_bias; always in Qwen2), and on
  // o_proj (Llama's attention_bias only).
  bool qkv_bias = false;
  bool o_bias = false;
  bool qk_norm = false;  // Qwen3's q_norm and k_norm
  bool tie_word_embeddings = false;
  // Mixture-of-Experts (qwen3_moe, mixtral; num_experts 0 otherwise): read from num_experts or
  // num_local_experts; Mixtral's moe_intermediate_size is its intermediate_size.
  int64_t num_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  bool norm_topk_prob = false;  // always true for Mixtral
  int64_t decoder_sparse_step = 1;
  std::vector<int64_t> mlp_only_layers;
  double router_aux_loss_coef = 0.001;
  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;  // config.json may give one id or a list

  // Whether layer i has experts rather than the dense MLP.
  bool sparse_layer(int64_t i) const;
  int64_t head_dim() const { return head_size > 0 ? head_size : hidden_size / num_attention_heads; }
};

// transformers' Qwen3MoeDecoderLayer rule: layer i has experts rather than the dense MLP when
// there are experts, (i + 1) is a multiple of decoder_sparse_step and i is not one of
// mlp_only_layers (Mixtral: step 1, none dense).
bool sparse_layer(int64_t layer, int64_t experts, int64_t decoder_sparse_step,
                  const std::vector<int64_t>& mlp_only_layers);

// Reads `path`. A file that is not JSON, lacks a dimension, or asks for what ampt's Llama does
// not build (another model_type, activation or rope_type, a sliding window, experts outside
// qwen3_moe and mixtral, more experts per token than experts, a router's jitter, an MLP bias, an
// odd head_dim, tensor-parallel pretraining_tp) is one RuntimeError line naming the file, the key
// and what is allowed.
LlamaConfig read_llama_config(const std::string& path);

// config.json text that transformers' AutoConfig reads back to `config`.
std::string llama_config_json(const LlamaConfig& config);

}  // namespace ampt::hf

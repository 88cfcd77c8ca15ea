// A Hugging Face config.json of the Llama architecture's families (LlamaForCausalLM,
// Qwen2ForCausalLM, Qwen3ForCausalLM, MistralForCausalLM, Qwen3MoeForCausalLM,
// MixtralForCausalLM): the architecture ampt builds to load its weights, and the file it writes
// when it hands one back. Qwen2 is Llama with biases on q/k/v; Qwen3 adds an RMSNorm over each
// query and key head before the rotation and a head_dim of its own (128 unless given); Mistral is
// Llama without biases. Qwen3-MoE is Qwen3's attention (head_dim hidden / heads unless given)
// with experts in every decoder_sparse_step-th block not in mlp_only_layers; Mixtral is Mistral
// with experts in every block, intermediate_size their width. All but Llama may attend through a
// sliding window, read as transformers reads it (LlamaArchitecture::sliding_window). Both
// spellings of rotary settings are read: transformers 5's `rope_parameters` and the hub's older
// `rope_theta` + `rope_scaling`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ampt::hf {

// Llama-3's stretch of the rotary wavelengths (rope_type llama3): wavelengths longer than the
// original context / low_freq_factor are divided by `factor`, shorter than context /
// high_freq_factor kept, and those between interpolated.
struct RopeLlama3 {
  double factor = 8.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_context = 8192;  // original_max_position_embeddings

  bool operator==(const RopeLlama3&) const = default;
};

// Mixture-of-Experts MLPs (Qwen3-MoE, Mixtral): in each sparse block a router scores every expert
// for each token (a softmax in fp32), and the token goes through the `top_k` best of `experts`
// SwiGLU MLPs, their outputs weighted by those probabilities. experts 0: every block is dense.
struct MoeArchitecture {
  int64_t experts = 0;  // num_experts (Qwen3-MoE's hub files) or num_local_experts
  int64_t top_k = 0;    // num_experts_per_tok
  int64_t intermediate = 0;  // each expert's width: moe_intermediate_size (Mixtral's intermediate_size)
  // The top_k probabilities rescaled to sum to 1 (Qwen3's norm_topk_prob; Mixtral always).
  bool normalize_top_k = false;
  // transformers' Qwen3MoeDecoderLayer rule: block i is sparse when (i + 1) is a multiple of
  // sparse_step (decoder_sparse_step) and i is not one of dense_layers (mlp_only_layers);
  // Mixtral: every block.
  int64_t sparse_step = 1;
  std::vector<int64_t> dense_layers;
  // The load-balancing loss's weight in the training loss (router_aux_loss_coef).
  double aux_loss_coef = 0.001;

  bool active() const { return experts > 0; }
  bool sparse(int64_t layer) const;
  bool operator==(const MoeArchitecture&) const = default;
};

// The architecture of a model of the Llama family, declared once, in ampt's names: models/
// builds it (models::LlamaDims is this and what a run adds to it), and this file reads it from
// a config.json and writes it back. A new setting is a member here and its key in
// read_llama_config and llama_config_json.
struct LlamaArchitecture {
  int64_t n_layer = 0;       // num_hidden_layers
  int64_t n_embd = 0;        // hidden_size
  int64_t n_head = 0;        // num_attention_heads
  int64_t n_kv_head = 0;     // num_key_value_heads: each key/value head serves n_head / n_kv_head
  int64_t head_size = 0;     // head_dim (Qwen3's own width); 0: n_embd / n_head
  int64_t intermediate = 0;  // intermediate_size: the SwiGLU MLP's width
  int64_t block_size = 0;    // context: max_position_embeddings
  int64_t vocab_size = 0;
  double rms_norm_eps = 1e-5;
  double rope_theta = 10000.0;
  std::optional<RopeLlama3> rope_llama3;  // none: plain rotary (rope_type "default")
  // Biases on the q, k and v projections (Llama's attention_bias; always in Qwen2), and on
  // o_proj (Llama's attention_bias only).
  bool qkv_bias = false;
  bool o_bias = false;
  bool qk_norm = false;    // Qwen3's q_norm and k_norm: an RMSNorm over each query and key head
  bool tied_head = false;  // tie_word_embeddings: the head reuses embed_tokens
  // Sliding-window attention, as transformers' masks have it: in a sliding layer a query attends
  // to itself and the sliding_window - 1 positions before it, in the others to every position
  // before it. 0: no sliding layer. sliding_layers holds one flag per layer; empty, every layer
  // slides (Mistral, Mixtral, Qwen3-MoE read one window for all).
  int64_t sliding_window = 0;
  std::vector<bool> sliding_layers;
  MoeArchitecture moe;
  // model_type: "llama", "qwen2", "qwen3", "mistral", "qwen3_moe" or "mixtral".
  std::string flavour = "llama";

  int64_t head_dim() const { return head_size > 0 ? head_size : n_embd / n_head; }
  int64_t query_width() const { return n_head * head_dim(); }  // q_proj's out, o_proj's in
  // The window of block `layer`'s attention: sliding_window where it slides, else 0 (all of it).
  int64_t window(int64_t layer) const;
  bool operator==(const LlamaArchitecture&) const = default;
};

// A config.json: the architecture, and the special tokens generation configs read.
struct LlamaConfig : LlamaArchitecture {
  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;  // config.json may give one id or a list
};

// Reads `path`. A file that is not JSON, lacks a dimension, or asks for what ampt's Llama does
// not build (another model_type, activation or rope_type, a window on a llama, experts outside
// qwen3_moe and mixtral, more experts per token than experts, a router's jitter, an MLP bias, an
// odd head_dim, tensor-parallel pretraining_tp) is one RuntimeError line naming the file, the key
// and what is allowed.
LlamaConfig read_llama_config(const std::string& path);

// config.json text that transformers' AutoConfig reads back to `config`, and read_llama_config
// too (head_dim spelled out: a head_size of 0 reads back as the width it stands for).
std::string llama_config_json(const LlamaConfig& config);

}  // namespace ampt::hf

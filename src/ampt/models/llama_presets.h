// The presets of the Llama architecture's families (Llama, Qwen2, Qwen3, Mistral), and the rule
// by which the dimension options or a pretrained config.json decide a Llama's dimensions.
#pragma once

#include "ampt/config/config.h"
#include "ampt/hf/llama_config.h"
#include "ampt/models/layer_inventory.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ampt::models {

// Llama-3's stretch of the rotary wavelengths (rope_type llama3): wavelengths longer than the
// original context / low_freq_factor are divided by `factor`, shorter than context /
// high_freq_factor kept, and those between interpolated.
struct RopeLlama3 {
  double factor = 8.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_context = 8192;
};

// Mixture-of-Experts MLPs (Qwen3-MoE, Mixtral): in each sparse block a router scores every expert
// for each token (a softmax in fp32), and the token goes through the `top_k` best of `experts`
// SwiGLU MLPs, their outputs weighted by those probabilities. experts 0: every block is dense.
struct MoeDims {
  int64_t experts = 0;
  int64_t top_k = 0;
  int64_t intermediate = 0;  // each expert's width (Qwen3's moe_intermediate_size)
  // The top_k probabilities rescaled to sum to 1 (Qwen3's norm_topk_prob; Mixtral always).
  bool normalize_top_k = false;
  // Block i is sparse when (i + 1) is a multiple of sparse_step and i is not one of
  // dense_layers (Qwen3's decoder_sparse_step and mlp_only_layers; Mixtral: every block).
  int64_t sparse_step = 1;
  std::vector<int64_t> dense_layers;
  // The load-balancing loss's weight in the training loss (router_aux_loss_coef), and the
  // router z-loss's (--router_z_loss_coef; 0: off).
  double aux_loss_coef = 0.001;
  double z_loss_coef = 0.0;
  // Expert parallelism: this rank holds experts [index · experts / count, (index + 1) · experts /
  // count) of each sparse layer (count 1: all of them).
  struct Shard {
    int64_t index = 0;
    int64_t count = 1;
  } shard;

  bool active() const { return experts > 0; }
  bool sparse(int64_t layer) const;
};

struct LlamaDims {
  int64_t n_layer = 0;
  int64_t n_embd = 0;        // hidden_size
  int64_t n_head = 0;
  int64_t n_kv_head = 0;     // grouped-query attention: each key/value head serves n_head / n_kv_head
  int64_t head_size = 0;     // Qwen3's (and any config.json's) head_dim; 0: n_embd / n_head
  int64_t intermediate = 0;  // the SwiGLU MLP's width
  int64_t block_size = 0;    // context: max_position_embeddings
  int64_t vocab_size = 0;
  double rms_norm_eps = 1e-5;
  double rope_theta = 10000.0;
  std::optional<RopeLlama3> rope_llama3;
  bool qkv_bias = false;  // Qwen2's
  bool o_bias = false;
  bool qk_norm = false;    // Qwen3's: an RMSNorm over each query and key head before the rotation
  bool tied_head = false;  // the head reuses embed_tokens (no lm_head parameter)
  double dropout = 0.0;   // on attention probabilities (attention_dropout); 0 in every release
  MoeDims moe;
  // The Hugging Face model_type written back: "llama", "qwen2", "qwen3", "mistral", "qwen3_moe"
  // or "mixtral".
  std::string flavour = "llama";

  int64_t head_dim() const { return head_size > 0 ? head_size : n_embd / n_head; }
  int64_t query_width() const { return n_head * head_dim(); }  // q_proj's out, o_proj's in
  // Parameters of a model of these dimensions, and of those one token computes with (the same
  // without experts; with them, only top_k of each sparse block's experts): what FLOPs and MFU
  // count.
  int64_t parameters() const;
  int64_t active_parameters() const;
  // What one rank holds of them under expert parallelism (moe.shard): its share of the experts.
  int64_t rank_parameters() const;
  // The blocks with experts; their experts' weights, those a token goes through (top_k of each
  // block's), and their router weights.
  int64_t sparse_blocks() const;
  int64_t expert_parameters() const;
  int64_t active_expert_parameters() const;
  int64_t router_parameters() const;
};

struct LlamaPreset {
  std::string name;  // the --model value
  LlamaDims dims;
  int64_t published = 0;  // the parameter count its model card states; 0: a tiny model
  int64_t published_active = 0;  // with experts: the active count its model card states
};

// llama, qwen2, qwen3 and mistral (tiny models for tests and examples; qwen3's heads twice as
// wide as n_embd / n_head, as Qwen3-0.6B's are), llama-3.2-1b, llama-3.1-8b, qwen2.5-0.5b,
// qwen2.5-7b, qwen3-0.6b, qwen3-1.7b, qwen3-8b and mistral-7b-v0.3 with the dimensions of their
// Hugging Face config.json.
const std::vector<LlamaPreset>& llama_presets();

// The dimensions of config.model: n_layer, n_embd, n_head, block_size and vocab_size are the
// option's value when non-zero and the preset's otherwise; dropout is always the option's. With
// config.init_from, its config.json decides (hf/llama_config.h) and an option that contradicts
// it (block_size may be smaller: the windows trained on) is a UsageError naming both. Throws
// UsageError when the heads are of odd width (or, without a head_dim of the preset's own,
// n_embd is not a multiple of n_head), or n_head is not a multiple of the key/value heads.
LlamaDims resolve_llama_dims(const config::Config& config);

// The blocks layers.0 ... and each one's Linear layers, self_attn.q_proj [C → C], k_proj and
// v_proj [C → n_kv_head · head_dim], o_proj, mlp.gate_proj and up_proj [C → intermediate] and
// down_proj, biases as qkv_bias and o_bias say; the head is lm_head or the tied embed_tokens.
// A sparse block's experts and router are no Linear layers: it lists its attention's only.
LayerInventory layer_inventory(const LlamaDims& dims);
// The block Linears of the model a Hugging Face config.json describes, as the weight files
// hold them (layer_inventory's names and shapes).
hf::DeclaredLinears declared_linears(const hf::LlamaConfig& config);

// The token windows a Llama of `config` trains on: block_size when set, else the model's context.
int64_t llama_window(const config::Config& config, const LlamaDims& dims);

}  // namespace ampt::models

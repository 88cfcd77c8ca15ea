// The presets of the Llama architecture's families (Llama, Qwen2, Qwen3, Mistral), and the rule
// by which the dimension options or a pretrained config.json decide a Llama's dimensions.
#pragma once

#include "ampt/config/config.h"
#include "ampt/hf/llama_config.h"
#include "ampt/models/attention_spec.h"
#include "ampt/models/layer_inventory.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ampt::models {

// Expert parallelism: this rank holds experts [index · experts / count, (index + 1) · experts /
// count) of each sparse layer (count 1: all of them).
struct ExpertShard {
  int64_t index = 0;
  int64_t count = 1;
};

// A Llama's architecture (hf::LlamaArchitecture, what a config.json holds) and what a run adds
// to it.
struct LlamaDims : hf::LlamaArchitecture {
  LlamaDims() = default;
  explicit LlamaDims(const hf::LlamaArchitecture& architecture) : hf::LlamaArchitecture(architecture) {}

  double dropout = 0.0;  // on attention probabilities (attention_dropout); 0 in every release
  // The router z-loss's weight in the training loss (--router_z_loss_coef; 0: off).
  double router_z_loss_coef = 0.0;
  ExpertShard expert_shard;

  // How block `layer` attends: within its sliding window, if it has one.
  AttentionSpec attention(int64_t layer) const { return {window(layer)}; }

  // Parameters of a model of these dimensions, and of those one token computes with (the same
  // without experts; with them, only top_k of each sparse block's experts): what FLOPs and MFU
  // count.
  int64_t parameters() const;
  int64_t active_parameters() const;
  // What one rank holds of them under expert parallelism (expert_shard): its share of the
  // experts.
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
hf::DeclaredLinears declared_linears(const hf::LlamaArchitecture& architecture);

// The token windows a Llama of `config` trains on: block_size when set, else the model's context.
int64_t llama_window(const config::Config& config, const LlamaDims& dims);

}  // namespace ampt::models

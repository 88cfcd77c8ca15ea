#include "ampt/models/llama_presets.h"

#include "ampt/core/errors.h"
#include "ampt/hf/llama_config.h"
#include "ampt/hf/pretrained.h"
#include "ampt/models/family_support.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace ampt::models {
namespace {

// Windows of a preset whose context runs to 128k tokens would not fit a GPU's memory at any
// batch: without --block_size a run trains on windows of this many tokens at most.
constexpr int64_t kDefaultWindow = 2048;

LlamaDims dims_of(int64_t layers, int64_t embd, int64_t heads, int64_t kv_heads, int64_t inter,
                  int64_t context, int64_t vocab, double eps, double theta, bool tied) {
  LlamaDims d;
  d.n_layer = layers;
  d.n_embd = embd;
  d.n_head = heads;
  d.n_kv_head = kv_heads;
  d.intermediate = inter;
  d.block_size = context;
  d.vocab_size = vocab;
  d.rms_norm_eps = eps;
  d.rope_theta = theta;
  d.tied_head = tied;
  return d;
}

LlamaDims llama3(LlamaDims d, double factor) {
  d.rope_llama3 = hf::RopeLlama3{factor, 1.0, 4.0, 8192};
  return d;
}

LlamaDims qwen2(LlamaDims d) {
  d.qkv_bias = true;
  d.flavour = "qwen2";
  return d;
}

LlamaDims qwen3(LlamaDims d, int64_t head_size) {
  d.head_size = head_size;
  d.qk_norm = true;
  d.flavour = "qwen3";
  return d;
}

LlamaDims mistral(LlamaDims d) {
  d.flavour = "mistral";
  return d;
}

// Qwen3's attention with sparse blocks throughout (Qwen3-MoE has no dense layers by default).
LlamaDims qwen3_moe(LlamaDims d, int64_t head_size, int64_t experts, int64_t top_k,
                    int64_t expert_width) {
  d = qwen3(d, head_size);
  d.flavour = "qwen3_moe";
  d.moe = {.experts = experts, .top_k = top_k, .intermediate = expert_width, .normalize_top_k = true};
  return d;
}

// Mistral's attention with every block sparse; intermediate is each expert's width.
LlamaDims mixtral(LlamaDims d, int64_t experts, int64_t top_k) {
  d.flavour = "mixtral";
  d.moe = {.experts = experts, .top_k = top_k, .intermediate = d.intermediate, .normalize_top_k = true};
  return d;
}

// The architecture of config.init_from's config.json; the dimension options may only repeat it.
LlamaDims llama_pretrained_dims(const config::Config& config) {
  const auto files = hf::pretrained_files(config);
  LlamaDims dims(hf::read_llama_config(files.config_json));
  dims.dropout = config.dropout;
  require_pretrained_dims(config, files.config_json, dims.n_layer, dims.n_embd, dims.n_head,
                          dims.vocab_size);
  if (config.block_size > dims.block_size) {
    throw UsageError(fmt::format("block_size {} exceeds {}'s max_position_embeddings {}",
                                 config.block_size, files.config_json, dims.block_size));
  }
  if (config.sliding_window != 0 && config.sliding_window != dims.sliding_window) {
    throw UsageError(fmt::format("sliding_window {} contradicts {}, whose window is {}: leave "
                                 "sliding_window out with init_from",
                                 config.sliding_window, files.config_json,
                                 dims.sliding_window > 0 ? std::to_string(dims.sliding_window) : "none"));
  }
  const auto preset = std::ranges::find(llama_presets(), config.model, &LlamaPreset::name);
  // A tiny preset's name stands for its family: it takes any architecture of it.
  const bool base = preset->published == 0;
  if (!base && (preset->dims.n_layer != dims.n_layer || preset->dims.n_embd != dims.n_embd ||
                preset->dims.n_head != dims.n_head)) {
    throw UsageError(fmt::format("model {} (n_layer {}, n_embd {}, n_head {}) is not the "
                                 "architecture of {} (n_layer {}, n_embd {}, n_head {}): leave "
                                 "--model out with init_from",
                                 config.model, preset->dims.n_layer, preset->dims.n_embd,
                                 preset->dims.n_head, files.config_json, dims.n_layer, dims.n_embd,
                                 dims.n_head));
  }
  return dims;
}

}  // namespace

int64_t LlamaDims::sparse_blocks() const {
  int64_t sparse = 0;
  for (int64_t i = 0; i < n_layer; ++i) sparse += moe.sparse(i) ? 1 : 0;
  return sparse;
}

int64_t LlamaDims::expert_parameters() const {
  return sparse_blocks() * moe.experts * 3 * n_embd * moe.intermediate;
}

int64_t LlamaDims::active_expert_parameters() const {
  return sparse_blocks() * moe.top_k * 3 * n_embd * moe.intermediate;
}

int64_t LlamaDims::router_parameters() const { return sparse_blocks() * moe.experts * n_embd; }

int64_t LlamaDims::parameters() const {
  // The blocks' Linear layers as the inventory lists them; per block the two RMSNorms and
  // Qwen3's q/k norms; the final norm, the embedding and an untied head; the experts and their
  // routers.
  const int64_t norms = n_layer * (2 * n_embd + (qk_norm ? 2 * head_dim() : 0)) + n_embd;
  return linear_counts(layer_inventory(*this).linears).parameters() + norms +
         vocab_size * n_embd * (tied_head ? 1 : 2) + expert_parameters() + router_parameters();
}

int64_t LlamaDims::rank_parameters() const {
  return parameters() - expert_parameters() + expert_parameters() / expert_shard.count;
}

int64_t LlamaDims::active_parameters() const {
  return parameters() - expert_parameters() + active_expert_parameters();
}

const std::vector<LlamaPreset>& llama_presets() {
  static const std::vector<LlamaPreset> presets = {
      {"llama", dims_of(2, 64, 4, 2, 128, 64, 256, 1e-5, 10000.0, false), 0},
      {"qwen2", qwen2(dims_of(2, 64, 4, 2, 128, 64, 256, 1e-6, 10000.0, true)), 0},
      {"qwen3", qwen3(dims_of(2, 64, 4, 2, 128, 64, 256, 1e-6, 1e6, true), 32), 0},
      {"mistral", mistral(dims_of(2, 64, 4, 2, 128, 64, 256, 1e-5, 1e6, false)), 0},
      // Tiny MoE models for tests and examples: 8 experts, 2 per token.
      {"qwen3-moe", qwen3_moe(dims_of(2, 64, 4, 2, 128, 64, 256, 1e-6, 1e6, false), 32, 8, 2, 32),
       0},
      {"mixtral", mixtral(dims_of(2, 64, 4, 2, 128, 64, 256, 1e-5, 1e6, false), 8, 2), 0},
      // meta-llama/Llama-3.2-1B and Llama-3.1-8B; Qwen/Qwen2.5-0.5B and Qwen2.5-7B.
      {"llama-3.2-1b",
       llama3(dims_of(16, 2048, 32, 8, 8192, 131072, 128256, 1e-5, 500000.0, true), 32.0),
       1'235'814'400},
      {"llama-3.1-8b",
       llama3(dims_of(32, 4096, 32, 8, 14336, 131072, 128256, 1e-5, 500000.0, false), 8.0),
       8'030'261'248},
      {"qwen2.5-0.5b", qwen2(dims_of(24, 896, 14, 2, 4864, 32768, 151936, 1e-6, 1e6, true)),
       494'032'768},
      {"qwen2.5-7b", qwen2(dims_of(28, 3584, 28, 4, 18944, 131072, 152064, 1e-6, 1e6, false)),
       7'615'616'512},
      // Qwen/Qwen3-0.6B, Qwen3-1.7B and Qwen3-8B; mistralai/Mistral-7B-v0.3.
      {"qwen3-0.6b", qwen3(dims_of(28, 1024, 16, 8, 3072, 40960, 151936, 1e-6, 1e6, true), 128),
       596'049'920},
      {"qwen3-1.7b", qwen3(dims_of(28, 2048, 16, 8, 6144, 40960, 151936, 1e-6, 1e6, true), 128),
       1'720'574'976},
      {"qwen3-8b", qwen3(dims_of(36, 4096, 32, 8, 12288, 40960, 151936, 1e-6, 1e6, false), 128),
       8'190'735'360},
      {"mistral-7b-v0.3",
       mistral(dims_of(32, 4096, 32, 8, 14336, 32768, 32768, 1e-5, 1e6, false)), 7'248'023'552},
      // Qwen/Qwen3-30B-A3B and mistralai/Mixtral-8x7B-v0.1: total and active parameters as
      // their model cards round them (30.5B / 3.3B, 46.7B / 12.9B), exactly.
      {"qwen3-30b-a3b",
       qwen3_moe(dims_of(48, 2048, 32, 4, 6144, 40960, 151936, 1e-6, 1e6, false), 128, 128, 8,
                 768),
       30'532'122'624, 3'353'032'704},
      {"mixtral-8x7b", mixtral(dims_of(32, 4096, 32, 8, 14336, 32768, 32000, 1e-5, 1e6, false), 8, 2),
       46'702'792'704, 12'879'925'248},
  };
  return presets;
}

LayerInventory layer_inventory(const LlamaDims& dims) {
  const int64_t C = dims.n_embd, q = dims.query_width(), kv = dims.n_kv_head * dims.head_dim(),
                I = dims.intermediate;
  LayerInventory inventory;
  for (int64_t i = 0; i < dims.n_layer; ++i) {
    const auto block = fmt::format("layers.{}", i);
    inventory.blocks.push_back(block);
    const auto layer = [&](const char* name, LinearRole role, int64_t in, int64_t out, bool bias) {
      inventory.linears.push_back({fmt::format("{}.{}", block, name), block, role, in, out, bias});
    };
    layer("self_attn.q_proj", LinearRole::q, C, q, dims.qkv_bias);
    layer("self_attn.k_proj", LinearRole::k, C, kv, dims.qkv_bias);
    layer("self_attn.v_proj", LinearRole::v, C, kv, dims.qkv_bias);
    layer("self_attn.o_proj", LinearRole::o, q, C, dims.o_bias);
    if (dims.moe.sparse(i)) {
      // transformers 5's names: the router "mlp.gate", the stacks "mlp.experts.<parameter>".
      const int64_t E = dims.moe.experts, W = dims.moe.intermediate;
      const auto& stacks = expert_group_parameters();
      inventory.routers.push_back({block + ".mlp.gate", block, LinearRole::router, C, E, false});
      inventory.expert_groups.push_back(
          {fmt::format("{}.mlp.experts.{}", block, stacks[0]), block, LinearRole::up, C, E * 2 * W, false, E});
      inventory.expert_groups.push_back(
          {fmt::format("{}.mlp.experts.{}", block, stacks[1]), block, LinearRole::down, W, E * C, false, E});
      continue;
    }
    layer("mlp.gate_proj", LinearRole::gate, C, I, false);
    layer("mlp.up_proj", LinearRole::up, C, I, false);
    layer("mlp.down_proj", LinearRole::down, I, C, false);
  }
  inventory.head_in = C;
  inventory.head_out = dims.vocab_size;
  if (!inventory.routers.empty()) {
    const auto experts = every_block(inventory.expert_groups.front());
    inventory.other_matmuls = fmt::format(
        "{} ({} experts' grouped GEMMs, in the autocast dtype) and {} (the router, in fp32)",
        experts.substr(0, experts.rfind('.')), dims.moe.experts, every_block(inventory.routers.front()));
  }
  return inventory;
}

hf::DeclaredLinears declared_linears(const hf::LlamaArchitecture& architecture) {
  return declared_linears(layer_inventory(LlamaDims(architecture)));
}

int64_t llama_window(const config::Config& config, const LlamaDims& dims) {
  return config.block_size > 0 ? config.block_size : std::min(dims.block_size, kDefaultWindow);
}

namespace {

LlamaDims option_dims(const config::Config& config) {
  const auto preset = std::ranges::find(llama_presets(), config.model, &LlamaPreset::name);
  if (preset == llama_presets().end()) throw std::invalid_argument("not a Llama model: " + config.model);
  if (!config.init_from.empty()) return llama_pretrained_dims(config);
  LlamaDims dims = preset->dims;
  const int64_t group = dims.n_head / dims.n_kv_head;
  if (config.n_embd != 0) {
    dims.intermediate = dims.intermediate * config.n_embd / dims.n_embd;
    dims.moe.intermediate = dims.moe.intermediate * config.n_embd / dims.n_embd;
    dims.n_embd = config.n_embd;
  }
  if (config.n_layer != 0) dims.n_layer = config.n_layer;
  if (config.block_size != 0) dims.block_size = std::max(dims.block_size, config.block_size);
  if (config.vocab_size != 0) dims.vocab_size = config.vocab_size;
  if (config.n_head != 0) dims.n_head = config.n_head;
  dims.dropout = config.dropout;
  if (config.sliding_window != 0) {
    if (dims.flavour == "llama") {
      throw UsageError(fmt::format("sliding_window {} with model {}: a llama model has no sliding "
                                   "window (transformers' LlamaForCausalLM); mistral, mixtral, "
                                   "qwen2, qwen3 and qwen3-moe have one",
                                   config.sliding_window, config.model));
    }
    if (config.sliding_window > dims.block_size) {
      throw UsageError(fmt::format("sliding_window {} exceeds model {}'s context of {} positions "
                                   "(block_size): a window that long is full attention; give 0 or "
                                   "a window of at most {}",
                                   config.sliding_window, config.model, dims.block_size, dims.block_size));
    }
    dims.sliding_window = config.sliding_window;
    dims.sliding_layers.clear();
  }
  if ((dims.head_size == 0 && dims.n_embd % dims.n_head != 0) || dims.head_dim() % 2 != 0) {
    throw UsageError(fmt::format(
        "n_embd {} is not divisible by n_head {} into an even head size (model {}): rotary "
        "embeddings rotate pairs of a head's dimensions",
        dims.n_embd, dims.n_head, config.model));
  }
  if (dims.n_head % group != 0) {
    throw UsageError(fmt::format("n_head {} is not a multiple of {}, the query heads model {} "
                                 "shares each key/value head among",
                                 dims.n_head, group, config.model));
  }
  dims.n_kv_head = dims.n_head / group;
  return dims;
}

}  // namespace

LlamaDims resolve_llama_dims(const config::Config& config) {
  auto dims = option_dims(config);
  if (config.router_aux_loss_coef < 0 && config.router_aux_loss_coef != -1) {
    throw UsageError(fmt::format("router_aux_loss_coef {:g}: expected a weight >= 0, or -1 for "
                                 "the model's",
                                 config.router_aux_loss_coef));
  }
  const auto require_experts = [&](const char* option) {
    if (dims.moe.active()) return;
    throw UsageError(fmt::format("{} is for models with experts; model {} has none", option,
                                 config.model));
  };
  if (config.router_aux_loss_coef >= 0) {
    require_experts("router_aux_loss_coef");
    dims.moe.aux_loss_coef = config.router_aux_loss_coef;
  }
  if (config.router_z_loss_coef > 0) {
    require_experts("router_z_loss_coef");
    dims.router_z_loss_coef = config.router_z_loss_coef;
  }
  if (config.expert_parallel > 1) {
    require_experts("expert_parallel");
    if (dims.moe.experts % config.expert_parallel != 0) {
      throw UsageError(fmt::format("expert_parallel {} does not divide model {}'s {} experts; use "
                                   "a divisor of {}",
                                   config.expert_parallel, config.model, dims.moe.experts,
                                   dims.moe.experts));
    }
    // Only a distributed run divides them: ampt export or generate of its checkpoint (whole
    // experts) builds the whole model.
    const auto layout = config::expert_layout(config.expert_parallel, config.launch);
    dims.expert_shard = {layout.shard, layout.count};
  }
  return dims;
}

}  // namespace ampt::models

// A transformer's layers as its family lists them once, from its dimensions and without building
// it: the blocks, each block's Linear layers with their shapes and roles, and the head. fp8's
// candidates and their pairing, LoRA's target matching, the memory estimate, ZeRO-3's block
// split and the Hugging Face readers and writers (declared_linears) all read this list; none
// keeps one of its own. Each family writes its inventory beside
// its dimensions (gpt_presets.h, llama_presets.h).
#pragma once

#include "ampt/hf/pretrained.h"
#include "ampt/precision/fp8_layers.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ampt::models {

// What a block's Linear layer computes, whatever its family calls it.
enum class LinearRole {
  qkv,   // queries, keys and values in one projection (GPT-2's c_attn)
  q, k, v,
  o,     // attention output (c_proj, o_proj)
  fc,    // the MLP's widening projection (GPT-2's c_fc)
  gate, up,
  down,    // the MLP's narrowing projection (GPT-2's mlp.c_proj, down_proj)
  router,  // a sparse block's logits over its experts
};

// A Linear layer of a block, named as the built model names it ("h.0.attn.c_attn"), with its
// weight W [out, in].
struct LinearLayer {
  std::string name;
  std::string block;  // the block it belongs to ("h.0")
  LinearRole role = LinearRole::q;
  int64_t in = 0, out = 0;
  bool bias = false;
  // An expert group's weight stack, as one [experts · out_e, in] matrix (out = experts · out_e).
  int64_t experts = 1;

  // Its input is a norm's output (fp32 under O1's autocast): the attention's input projections
  // and the MLP's first ones.
  bool reads_norm() const;
  // A rank-r adapter's parameters on it: r (in + out) for a Linear, r · E (in + out_e) for an
  // expert group (lora.h).
  int64_t lora_parameters(int64_t rank) const { return rank * (experts * in + out); }
};

struct LayerInventory {
  std::vector<std::string> blocks;   // in the order the forward runs them ("h.0", "h.1", ...)
  std::vector<LinearLayer> linears;  // every block's Linear layers, in module order
  // The head: hidden [rows, head_in] → logits [rows, head_out] (a padded vocabulary included),
  // which the fused loss reads as a weight, never as a Linear layer.
  int64_t head_in = 0, head_out = 0;
  // Layers of one block that run as one operation only in one precision: fp8 gives each pair
  // one choice (GPT-2's MLP, fused with its GELU).
  std::vector<std::pair<LinearRole, LinearRole>> one_precision;
  // A sparse block's matmuls that are no Linear layers, named as the built model names them: its
  // router ("layers.1.mlp.gate", role router, out = its experts) and its expert groups' weight
  // stacks ("layers.1.mlp.experts.gate_up_proj", role up, and "...down_proj", role down), each
  // one [experts · out_e, in] matrix of the layer's whole `experts`. The modules, the Hugging
  // Face names and the planner read them from here.
  std::vector<LinearLayer> routers;
  std::vector<LinearLayer> expert_groups;
  // The blocks' matmuls that are no Linear layers, which fp8 and adapters do not reach (a sparse
  // block's experts and router), said in one line for the fp8 layers table; empty: none.
  std::string other_matmuls;

  // Whether this is a transformer's (it has blocks).
  bool transformer() const { return !blocks.empty(); }
  // The Linear layers of one block (the first one's: every block has the same).
  std::vector<LinearLayer> block_linears() const;
};

// The Linear layers' weights (in · out each) and biases.
struct LinearCounts {
  int64_t weights = 0, biases = 0;
  int64_t parameters() const { return weights + biases; }
};
LinearCounts linear_counts(const std::vector<LinearLayer>& layers);

// The layers fp8 may run, in module order: every block Linear, paired as `one_precision` says,
// then "head" when the fused loss computes it (`fused_head`) and its width is a multiple of 16
// (fp8 GEMM tiles).
std::vector<precision::Fp8Candidate> fp8_candidates(const LayerInventory& inventory,
                                                    bool fused_head);

// The Linears of block `block` ("layers.3"), in inventory order.
std::vector<LinearLayer> linears_of(const LayerInventory& inventory, const std::string& block);

// The layer of `block` (linears_of's) with role `role`; std::logic_error where the inventory
// declares none.
const LinearLayer& layer_of(const std::vector<LinearLayer>& block, LinearRole role);

// A sparse block's router and expert groups (the up projection's stack first); null router
// name where the block is dense.
struct SparseLayers {
  LinearLayer router;
  std::vector<LinearLayer> expert_groups;
  bool sparse() const { return !router.name.empty(); }
};
SparseLayers sparse_layers_of(const LayerInventory& inventory, const std::string& block);

// The names of the modules between `layer`'s block and the layer itself, outermost first, and
// the layer's own last: "layers.1.mlp.experts.gate_up_proj" → {"mlp", "experts",
// "gate_up_proj"}. What the modules register their children as.
std::vector<std::string> module_path(const LinearLayer& layer);
// `layer`'s name with its block's index as "*": "layers.*.mlp.gate", for messages.
std::string every_block(const LinearLayer& layer);

// The block Linears as the Hugging Face readers and writers take them (hf/pretrained.h).
hf::DeclaredLinears declared_linears(const LayerInventory& inventory);

}  // namespace ampt::models

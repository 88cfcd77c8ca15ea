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
  down,  // the MLP's narrowing projection (GPT-2's mlp.c_proj, down_proj)
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

// The block Linears as the Hugging Face readers and writers take them (hf/pretrained.h).
hf::DeclaredLinears declared_linears(const LayerInventory& inventory);

}  // namespace ampt::models

// Training-FLOP estimates (forward + backward) behind the tokens/s and MFU figures.
#pragma once

#include "ampt/models/gpt_presets.h"
#include "ampt/models/llama_presets.h"

#include <cstdint>

namespace ampt::models {

// 2 FLOPs per multiply-accumulate, and the backward pass costs twice the forward (one matmul for
// the input gradient, one for the weight gradient): 6 FLOPs per forward MAC. Elementwise work
// (norms, activations, pooling) is not counted, as in every MFU convention.
int64_t training_flops_from_macs(int64_t forward_macs);

// llm.c's gpt2_estimate_mfu exactly: 6·N + 6·L·C·T FLOPs per token, where N counts every
// parameter (the tied embedding once, since it is also the head's matmul; the LayerNorms, biases
// and position embedding over-count slightly), L = n_layer, C = n_embd and T the trained sequence
// length. The second term is attention's QKᵀ and AV matmuls: 2·T·C MACs per token and layer
// forward, 12·T·C FLOPs with the backward, halved because the causal mask leaves T/2 keys on
// average. (nanoGPT's estimate_mfu keeps the 12, takes T = block_size and leaves the position
// embedding out of N.)
int64_t gpt_training_flops_per_token(int64_t parameters, const GptDims& dims, int64_t seq_len);

// The same convention for a Llama: 6 FLOPs per matmul weight (the head included, the input
// embedding, a lookup, not; its norms left out; of experts, the top_k a token goes through and
// the routers) plus attention's 6·L·C·T, T a sliding layer's window where that is shorter.
int64_t llama_training_flops_per_token(const LlamaDims& dims, int64_t seq_len);

}  // namespace ampt::models

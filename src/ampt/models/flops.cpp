#include "ampt/models/flops.h"

#include <algorithm>

namespace ampt::models {

int64_t training_flops_from_macs(int64_t forward_macs) { return 6 * forward_macs; }

int64_t gpt_training_flops_per_token(int64_t parameters, const GptDims& dims, int64_t seq_len) {
  return 6 * parameters + 6 * dims.n_layer * dims.n_embd * seq_len;
}

int64_t llama_training_flops_per_token(const LlamaDims& dims, int64_t seq_len) {
  // The blocks' Linear weights and biases and the head's weight (the embedding is a lookup).
  // With experts, those a token goes through (top_k of each sparse block's) and the routers.
  const int64_t matmul = dims.vocab_size * dims.n_embd +
                         linear_counts(layer_inventory(dims).linears).parameters() +
                         dims.active_expert_parameters() + dims.router_parameters();
  // The attention's scores and weighted values over the keys each layer reads: a sliding
  // layer's at most its window.
  int64_t keys = 0;
  for (int64_t layer = 0; layer < dims.n_layer; ++layer) {
    const int64_t window = dims.window(layer);
    keys += window > 0 ? std::min(window, seq_len) : seq_len;
  }
  return 6 * matmul + 6 * dims.query_width() * keys;
}

}  // namespace ampt::models

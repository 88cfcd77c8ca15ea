// A Mixture-of-Experts MLP (Qwen3-MoE's and Mixtral's sparse block): a router in fp32 scores
// every expert for each token, each token goes through its top_k experts, and their outputs are
// summed, weighted by the router's probabilities. The experts are one 3-D weight per projection
// (transformers 5's layout), run as one GEMM per expert over the tokens sorted by expert: never
// a loop over tokens, nor a Linear module per expert.
#pragma once

#include "ampt/models/llama_presets.h"
#include "ampt/models/quantizable.h"

#include <torch/nn/module.h>
#include <torch/types.h>

#include <vector>

namespace ampt::models {

// Each token's top_k experts and their weights, from a router's logits.
struct Routing {
  torch::Tensor experts;  // [N, top_k] int64, best first
  torch::Tensor weights;  // [N, top_k] float32
};

// softmax(logits) in fp32 over all experts, its top_k, rescaled to sum to 1 when
// `normalize_top_k` (transformers' Qwen3-MoE and Mixtral routers; the two differ only in
// whether that rescaling is optional).
Routing route(const torch::Tensor& logits, int64_t top_k, bool normalize_top_k);

// The experts' SwiGLU MLPs: gate_up_proj [E, 2I, C] (each expert's gate rows, then its up rows)
// and down_proj [E, C, I], as nn.Linear weights ([out, in]). A LoRA base's frozen experts can be
// stored quantized (--base_dtype, quantizable.h), each 3-D weight as one storage.
class ExpertsImpl : public torch::nn::Module, public QuantizableWeights {
 public:
  ExpertsImpl(int64_t experts, int64_t n_embd, int64_t intermediate);
  // x [N, C] → Σ_k weights[:, k] · expert_{experts[:, k]}(x) [N, C]. The N · top_k (token,
  // expert) pairs are sorted by expert once; each expert's contiguous slice goes through its
  // weights as one GEMM (on a GPU in bf16, all of them as one at::_grouped_mm), and the results
  // are added back to their tokens. A stored weight is dequantized whole in the compute dtype
  // for the GEMMs and again for the input's gradient, never kept for backward (QLoRA's
  // MatMul4Bit, over the group).
  torch::Tensor forward(const torch::Tensor& x, const Routing& routing);

  const std::vector<std::string>& quantizable_names() const override;
  torch::Tensor& quantizable_parameter(size_t i) override { return i == 0 ? gate_up_proj : down_proj; }

  torch::Tensor gate_up_proj, down_proj;
};
TORCH_MODULE(Experts);

// The router: weight [E, C], no bias. Not a Linear layer (no adapter, fp8 or quantized storage
// reaches it): its logits x · weightᵀ are computed in fp32, autocast off and both operands cast
// up, whatever the model's precision, because near-ties between experts would flip in bf16
// (Switch, ST-MoE and Megatron's moe_router_dtype keep it so).
class RouterImpl : public torch::nn::Module {
 public:
  RouterImpl(int64_t experts, int64_t n_embd);
  // x [N, C] → [N, E] float32.
  torch::Tensor forward(const torch::Tensor& x);

  torch::Tensor weight;
};
TORCH_MODULE(Router);

// The sparse block's MLP: the router `gate` and the experts.
class SparseMoeImpl : public torch::nn::Module {
 public:
  explicit SparseMoeImpl(const LlamaDims& dims);
  struct Output {
    torch::Tensor y;              // [B, T, C]
    torch::Tensor router_logits;  // [B·T, E] float32: what the load-balancing loss reads
  };
  // x [B, T, C].
  Output forward(const torch::Tensor& x);

  Router gate{nullptr};
  Experts experts{nullptr};

 private:
  int64_t top_k_;
  bool normalize_top_k_;
};
TORCH_MODULE(SparseMoe);

// The experts' balance over every sparse block's router logits of one forward (each [N, E]),
// from one softmax and top-k of them all:
// - `loss`: transformers' load_balancing_loss_func, E · Σ_e f_e · P_e, where f_e is the share of
//   (token, slot) picks that went to expert e and P_e the mean router probability of e, both
//   over all blocks' tokens together; top_k when the load is even. 0-dim float32.
// - `load`, for the log: the busiest and the idlest expert's share of its block's picks, over
//   all sparse blocks, times the expert count (1 is an even load, 0 an expert no token picked).
//   [max, min] float32, no gradient.
struct LoadBalance {
  torch::Tensor loss;
  torch::Tensor load;
};
LoadBalance load_balance(const std::vector<torch::Tensor>& router_logits, int64_t top_k);

// ST-MoE's router z-loss: the mean over every sparse block's tokens of logsumexp(logits)², which
// keeps the logits small enough for fp32's softmax to stay exact. 0-dim float32.
torch::Tensor router_z_loss(const std::vector<torch::Tensor>& router_logits);


}  // namespace ampt::models

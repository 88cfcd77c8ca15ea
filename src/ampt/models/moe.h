// A Mixture-of-Experts MLP (Qwen3-MoE's and Mixtral's sparse block): a router in fp32 scores
// every expert for each token, each token goes through its top_k experts, and their outputs are
// summed, weighted by the router's probabilities. The experts are one 3-D weight per projection
// (transformers 5's layout), run as one GEMM per expert over the tokens sorted by expert: never
// a loop over tokens, nor a Linear module per expert.
#pragma once

#include "ampt/models/layer_inventory.h"
#include "ampt/models/llama_presets.h"
#include "ampt/models/quantizable.h"

#include <c10/util/intrusive_ptr.h>
#include <torch/custom_class.h>
#include <torch/nn/module.h>
#include <torch/types.h>

#include <map>
#include <string>
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

// How the ranks that divide a layer's experts among them (expert parallelism) send one another
// rows: the run gives every sharded expert group one, over c10d's all_to_all
// (train/expert_parallel.h).
class ExpertExchange : public torch::CustomClassHolder {
 public:
  virtual int64_t ranks() const = 0;
  // The rows every rank sent this one, in rank order (sum(receive) rows): `input`'s first
  // send[0] rows go to rank 0, the next send[1] to rank 1, and so on. receive[i] is what rank i
  // sends here. Every rank calls it together.
  virtual torch::Tensor all_to_all(const torch::Tensor& input, const std::vector<int64_t>& send,
                                   const std::vector<int64_t>& receive) = 0;
};

// The experts' SwiGLU MLPs: gate_up_proj [E, 2I, C] (each expert's gate rows, then its up rows)
// and down_proj [E, C, I], as nn.Linear weights ([out, in]). A LoRA base's frozen experts can be
// stored quantized (--base_dtype, quantizable.h), each 3-D weight as one storage.
//
// Under expert parallelism (`shard`) the module holds its rank's share of the experts, cut from
// the same initial weights a whole one would draw; once given an exchange
// (set_expert_exchange), each forward sends every (token, expert) pair's row to the rank that
// holds the expert and takes the result back, both by all_to_all, whose backward is the
// reverse all_to_all.
// An expert group's parameters, the up projection's stack and the down one's (transformers 5's
// names), as ExpertsImpl registers them and the inventory names them.
const std::vector<std::string>& expert_group_parameters();

class ExpertsImpl : public torch::nn::Module, public QuantizableWeights {
 public:
  ExpertsImpl(int64_t experts, int64_t n_embd, int64_t intermediate, ExpertShard shard = {});
  // x [N, C] → Σ_k weights[:, k] · expert_{experts[:, k]}(x) [N, C]. The N · top_k (token,
  // expert) pairs are sorted by expert once; each expert's contiguous slice goes through its
  // weights as one GEMM (on a GPU in bf16, all of them as one at::_grouped_mm), and the results
  // are added back to their tokens. A stored weight is dequantized whole in the compute dtype
  // for the GEMMs and again for the input's gradient, never kept for backward (QLoRA's
  // MatMul4Bit, over the group).
  torch::Tensor forward(const torch::Tensor& x, const Routing& routing);

  const std::vector<std::string>& quantizable_names() const override;
  torch::Tensor& quantizable_parameter(size_t i) override { return i == 0 ? gate_up_proj : down_proj; }

  int64_t total_experts() const { return total_; }
  int64_t first_expert() const { return first_; }
  bool sharded() const { return gate_up_proj.size(0) < total_; }
  void set_exchange(c10::intrusive_ptr<ExpertExchange> exchange) { exchange_ = std::move(exchange); }

  torch::Tensor gate_up_proj, down_proj;

 private:
  // `rows` sorted by expert, `per_expert` rows for each of this module's experts → their outputs.
  torch::Tensor run(const torch::Tensor& rows, const torch::Tensor& per_expert);
  // The same for rows sorted by global expert (`per_expert` [total]): through the exchange to
  // the ranks holding the experts and back.
  torch::Tensor exchange_and_run(const torch::Tensor& rows, const torch::Tensor& per_expert);

  int64_t total_;
  int64_t first_ = 0;
  c10::intrusive_ptr<ExpertExchange> exchange_;
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

// The sparse block's MLP: the router `gate` and the experts, registered as `layers` (its
// inventory's router and expert groups) name them.
class SparseMoeImpl : public torch::nn::Module {
 public:
  SparseMoeImpl(const LlamaDims& dims, const SparseLayers& layers);
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

// A sharded expert group weight's place in the whole one: rows [first, first + count) of
// `total` along its first dimension.
struct ExpertSlice {
  int64_t first = 0;
  int64_t count = 0;
  int64_t total = 0;
};
// Whether `root` has an expert group (a sparse layer).
bool has_experts(const torch::nn::Module& root);
// Every sharded expert group weight of `root` by its name in root.named_parameters(); empty when
// the model holds all its experts.
std::map<std::string, ExpertSlice> expert_slices(const torch::nn::Module& root);
// The slice of `slices` that `tensor`, named `name`, is the whole stack (`rows`:
// &ExpertSlice::total) or one rank's share (&ExpertSlice::count) of: a sharded expert group
// weight, or its optimizer state ("<weight>.exp_avg"); null for anything else (an AdamW step
// count has not the weight's shape).
const ExpertSlice* expert_slice_of(const std::map<std::string, ExpertSlice>& slices,
                                   const std::string& name, const torch::Tensor& tensor,
                                   int64_t ExpertSlice::*rows);
// Gives every sharded expert group of `root` the exchange its forward sends rows through.
void set_expert_exchange(torch::nn::Module& root, const c10::intrusive_ptr<ExpertExchange>& exchange);

// ST-MoE's router z-loss: the mean over every sparse block's tokens of logsumexp(logits)², which
// keeps the logits small enough for fp32's softmax to stay exact. 0-dim float32.
torch::Tensor router_z_loss(const std::vector<torch::Tensor>& router_logits);


}  // namespace ampt::models

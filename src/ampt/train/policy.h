// A forward as the run computes it: the model a run trains, held with its precision (the
// PrecisionState: the stage's autocast dtype, the fp32 islands, O1's half working weights, O2's
// half weights and their masters, a LoRA base's frozen dtype), whether its fused operations are
// on, and ZeRO-3's gathers. Training's objective, evaluation and `ampt generate` run every forward
// through it (compute), so that none of them closes over a Run or sets up a precision of its own.
// ("Policy" as reinforcement learning says it: the model that is trained and sampled from; what
// autocast does in each stage is precision::PrecisionPolicy, which the PrecisionState holds.)
#pragma once

#include "ampt/config/config.h"
#include "ampt/data/batch.h"
#include "ampt/distributed/sharded_parameters.h"
#include "ampt/models/kv_cache.h"
#include "ampt/models/registry.h"
#include "ampt/precision/autocast_guard.h"
#include "ampt/precision/precision_islands.h"
#include "ampt/precision/precision_state.h"

#include <c10/core/Device.h>

#include <vector>

namespace ampt::train {

class Policy {
 public:
  // `model` under `config`'s precision on `device` (precision::PrecisionState: throws where the
  // device cannot give it, or for a keep_fp32_modules pattern that matches no module), its
  // autocast cache and its fused kernels as configured.
  Policy(const config::Config& config, models::Model model, const c10::Device& device);
  Policy(const Policy&) = delete;  // the PrecisionState looks up its islands through itself
  Policy& operator=(const Policy&) = delete;

  models::Model& model() { return model_; }
  const models::Model& model() const { return model_; }
  precision::PrecisionState& precision() { return precision_; }
  const precision::PrecisionState& precision() const { return precision_; }
  // The trained parameters (those that take gradients), in the module's order.
  const std::vector<torch::Tensor>& parameters() const { return parameters_; }

  // Whether the model's fused operations are on; set_fused switches them (Model::set_fused,
  // where the family has any) and remembers it for what asks (fp8's candidates, the fused paths).
  bool fused() const { return fused_; }
  void set_fused(bool fused);

  // ZeRO-3: every forward from now on first gathers `sharded`'s root (the embeddings, final norm
  // and head, read outside the blocks, whose hooks gather themselves); nullptr: whole weights.
  void gather_with(distributed::ShardedParameters* sharded) { sharded_ = sharded; }
  // Releases every gathered parameter (after a step's backward, after an evaluation); a no-op
  // for whole weights.
  void release_gathered();

  // forward() as the run computes it: under autocast in the stage's dtype (or without it), this
  // model's fp32 islands applied and ZeRO-3's root gathered, on this thread. A forward of
  // another model (a preference objective's frozen copy) takes the same autocast; the islands
  // are this model's modules.
  template <class Forward>
  decltype(auto) compute(Forward&& forward) {
    const Context context(*this);
    return forward();
  }

  // The logits [B, T, vocab] of the batch's inputs (Model::logits), computed as above.
  torch::Tensor logits(const data::Batch& batch);
  // Generation: the logits [B, vocab] of the position after `tokens` [B, T_new], which follow
  // `cache`'s positions (Model::next_logits), computed as above: the prompt's prefill and each
  // decoding step take the precision the training forward takes.
  torch::Tensor next_logits(const torch::Tensor& tokens, models::KvCache& cache);

 private:
  // The precision of one forward while it lives.
  class Context {
   public:
    explicit Context(Policy& policy);

   private:
    precision::AutocastGuard autocast_;
    precision::IslandScope islands_;
  };

  models::Model model_;
  std::vector<torch::Tensor> parameters_;
  precision::PrecisionState precision_;
  c10::Device device_;
  bool autocast_cache_;
  bool fused_;
  distributed::ShardedParameters* sharded_ = nullptr;
};

}  // namespace ampt::train

#include "ampt/models/attention.h"

#include "ampt/kernels/fused_attention.h"
#include "ampt/kernels/fused_linear.h"
#include "ampt/models/activation_checkpoint.h"
#include "ampt/models/lora.h"
#include "ampt/precision/precision_islands.h"

#include <ATen/autocast_mode.h>
#include <ATen/ops/scaled_dot_product_attention.h>

#include <stdexcept>

namespace ampt::models {

// The fp32-island hooks every submodule call goes through (precision/precision_islands.h).
using precision::call;

namespace {

torch::Tensor frozen_or_trained(torch::nn::Linear& linear,
                                const c10::intrusive_ptr<precision::Fp8Linear>& fp8,
                                const torch::Tensor& x, bool epilogues) {
  if (fp8) return fp8->forward(x, linear->weight, linear->bias, /*record=*/!recomputing());
  const auto* islands = precision::active_islands();
  if (!epilogues || (islands != nullptr && islands->find(linear.get()) != nullptr)) {
    return call(linear, x);
  }
  return kernels::fused_linear(x, linear->weight, linear->bias);
}

// x in autocast's dtype where autocast would cast it for an ordinary Linear: the base's GEMM and
// the adapter's then share one cast copy (each would otherwise keep its own for the backward).
torch::Tensor cast_once(const torch::nn::Linear& linear, const torch::Tensor& x) {
  const auto device = x.device().type();
  const auto* islands = precision::active_islands();
  if (x.scalar_type() != torch::kFloat || !at::autocast::is_autocast_enabled(device) ||
      (islands != nullptr && islands->find(linear.get()) != nullptr)) {
    return x;
  }
  return x.to(at::autocast::get_autocast_dtype(device));
}

}  // namespace

torch::Tensor project(torch::nn::Linear& linear, const c10::intrusive_ptr<precision::Fp8Linear>& fp8,
                      const torch::Tensor& x, bool epilogues) {
  const auto adapter = lora_adapter(*linear);
  if (!adapter) return frozen_or_trained(linear, fp8, x, epilogues);
  const auto in = fp8 ? x : cast_once(linear, x);
  // The adapter's GEMMs run beside the base's, in the same precision: in fp32 where the Linear
  // is an fp32 island, under autocast otherwise.
  return frozen_or_trained(linear, fp8, in, epilogues) +
         precision::through_island(*linear, in, [&](const torch::Tensor& input) {
           return lora_update(adapter, input, linear->is_training());
         });
}

CausalSelfAttentionImpl::CausalSelfAttentionImpl(int64_t n_embd, int64_t n_head, double dropout)
    : n_head_(n_head), dropout_(dropout) {
  c_attn = register_module("c_attn", torch::nn::Linear(n_embd, 3 * n_embd));
  c_proj = register_module("c_proj", torch::nn::Linear(n_embd, n_embd));
  resid_dropout_ = register_module("resid_dropout", torch::nn::Dropout(dropout));
}

torch::Tensor CausalSelfAttentionImpl::heads(const torch::Tensor& t) const {
  return t.view({t.size(0), t.size(1), n_head_, t.size(2) / n_head_}).transpose(1, 2);
}

torch::Tensor CausalSelfAttentionImpl::project_out(const torch::Tensor& y) {
  const int64_t batch = y.size(0), time = y.size(2), width = y.size(1) * y.size(3);
  return resid_dropout_->forward(
      project(c_proj, fp8_proj_, y.transpose(1, 2).contiguous().view({batch, time, width}),
              epilogues_));
}

torch::Tensor CausalSelfAttentionImpl::forward(const torch::Tensor& x, const PackedLayout& packed) {
  const auto* islands = precision::active_islands();
  const bool whole = fused_ && !packed.packed() && !fp8_attn_ && !fp8_proj_ &&
                     !lora_adapter(*c_attn) && !lora_adapter(*c_proj) &&
                     (dropout_ == 0.0 || !is_training()) &&
                     (islands == nullptr || (islands->find(c_attn.get()) == nullptr &&
                                             islands->find(c_proj.get()) == nullptr));
  if (whole) {
    const kernels::AttentionWeights weights{c_attn->weight, c_attn->bias, c_proj->weight,
                                            c_proj->bias};
    if (auto out = kernels::fused_causal_attention(x, weights, n_head_, epilogues_)) return *out;
  }
  // [B, T, 3C] → three [B, n_head, T, head_dim] views, the layout SDPA expects.
  const auto qkv = project(c_attn, fp8_attn_, x, epilogues_).split(x.size(2), /*dim=*/2);
  const double dropout = is_training() ? dropout_ : 0.0;
  if (packed.packed()) {
    return project_out(
        packed_attention(heads(qkv[0]), heads(qkv[1]), heads(qkv[2]), packed, dropout));
  }
  // is_causal instead of an explicit mask lets SDPA pick flash attention (bf16/fp16 on a GPU)
  // and skip the masked half of the work. Attention dropout only while training, as nn.Dropout.
  return project_out(at::scaled_dot_product_attention(heads(qkv[0]), heads(qkv[1]),
                                                      heads(qkv[2]), /*attn_mask=*/{}, dropout,
                                                      /*is_causal=*/true));
}

torch::Tensor CausalSelfAttentionImpl::forward_cached(
    const torch::Tensor& x, std::pair<torch::Tensor, torch::Tensor>& cache) {
  auto& [keys, values] = cache;
  const bool first = !keys.defined();
  if (!first && x.size(1) != 1) {
    throw std::invalid_argument("forward_cached: after the prompt, one position at a time");
  }
  const auto qkv = project(c_attn, fp8_attn_, x).split(x.size(2), /*dim=*/2);
  keys = first ? heads(qkv[1]) : torch::cat({keys, heads(qkv[1])}, 2);
  values = first ? heads(qkv[2]) : torch::cat({values, heads(qkv[2])}, 2);
  // The prompt attends causally within itself; a later single position attends to everything
  // cached before it, which needs no mask.
  return project_out(at::scaled_dot_product_attention(heads(qkv[0]), keys, values,
                                                      /*attn_mask=*/{}, 0.0,
                                                      /*is_causal=*/first && x.size(1) > 1));
}

c10::intrusive_ptr<precision::Fp8Linear> fp8_layer(const precision::Fp8Recipe& recipe,
                                                   bool selected) {
  return selected ? c10::make_intrusive<precision::Fp8Linear>(recipe)
                  : c10::intrusive_ptr<precision::Fp8Linear>();
}

void CausalSelfAttentionImpl::enable_fp8(const precision::Fp8Recipe& recipe,
                                         const precision::Fp8Selected& selected,
                                         const std::string& prefix) {
  fp8_attn_ = fp8_layer(recipe, selected(prefix + "c_attn"));
  fp8_proj_ = fp8_layer(recipe, selected(prefix + "c_proj"));
}

}  // namespace ampt::models

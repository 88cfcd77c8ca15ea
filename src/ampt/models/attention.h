// Causal multi-head self-attention of a GPT block.
#pragma once

#include "ampt/models/packed_sequences.h"
#include "ampt/precision/fp8_layers.h"
#include "ampt/precision/fp8_linear.h"

#include <torch/nn/module.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>

#include <string>
#include <utility>

namespace ampt::models {

// A Linear layer whose matmul runs in fp8 through `fp8` when that is set (precision/fp8_linear.h),
// else the layer itself, or with `epilogues` (and no fp32 island around it) as
// kernels::fused_linear, whose backward takes the weight's and bias's gradients from one GEMM.
// A recomputation (activation checkpointing) leaves fp8 scales alone. A LoRA adapter on the
// layer (lora.h) adds its update to whichever of these ran.
torch::Tensor project(torch::nn::Linear& linear, const c10::intrusive_ptr<precision::Fp8Linear>& fp8,
                      const torch::Tensor& x, bool epilogues = false);

// A new fp8 state for a Linear layer when `selected`, else none (the layer runs as it is).
c10::intrusive_ptr<precision::Fp8Linear> fp8_layer(const precision::Fp8Recipe& recipe,
                                                   bool selected);

// One fused q/k/v projection, scaled dot-product attention with a causal mask, and an output
// projection. Names follow nanoGPT (c_attn, c_proj) so state dicts line up with GPT-2's.
class CausalSelfAttentionImpl : public torch::nn::Module {
 public:
  CausalSelfAttentionImpl(int64_t n_embd, int64_t n_head, double dropout);
  // x: [B, T, n_embd] → [B, T, n_embd]; position t attends to positions ≤ t only, and only to
  // those of its own example where `packed` cuts the rows into examples.
  torch::Tensor forward(const torch::Tensor& x, const PackedLayout& packed = {});
  // The same for new positions after those whose keys and values `cache` holds ([B, n_head,
  // T_cached, head_dim] each; undefined when empty), which it then holds too: generation
  // computes each position once. x holds either the whole prompt (empty cache) or one position.
  torch::Tensor forward_cached(const torch::Tensor& x, std::pair<torch::Tensor, torch::Tensor>& cache);

  torch::nn::Linear c_attn{nullptr};
  torch::nn::Linear c_proj{nullptr};  // a residual projection: GPT-2 scales its init

  // Runs c_attn and c_proj in fp8 from now on where `selected` names them (prefix + "c_attn").
  void enable_fp8(const precision::Fp8Recipe& recipe, const precision::Fp8Selected& selected,
                  const std::string& prefix);
  // --fused_kernels: the attention as one operation (kernels/fused_attention.h) where nothing
  // needs its parts (fp8, an adapter, an fp32 island, dropout); `epilogues`: c_attn and c_proj,
  // where not in fp8, take their weight and bias gradients from one GEMM (kernels/fused_linear.h;
  // --gemm_epilogues).
  void set_fused(bool fused, bool epilogues) {
    fused_ = fused;
    epilogues_ = epilogues;
  }

 private:
  // [B, T, C] → [B, n_head, T, C / n_head]
  torch::Tensor heads(const torch::Tensor& t) const;
  // The attention output [B, n_head, T, head_dim] back to [B, T, C] through c_proj.
  torch::Tensor project_out(const torch::Tensor& y);

  c10::intrusive_ptr<precision::Fp8Linear> fp8_attn_;
  c10::intrusive_ptr<precision::Fp8Linear> fp8_proj_;
  int64_t n_head_;
  double dropout_;
  bool fused_ = true;
  bool epilogues_ = true;
  torch::nn::Dropout resid_dropout_{nullptr};
};
TORCH_MODULE(CausalSelfAttention);

}  // namespace ampt::models

// A GPT-2 style decoder-only transformer language model.
#pragma once

#include "ampt/models/attention.h"
#include "ampt/models/gpt_presets.h"
#include "ampt/models/decoder.h"

#include <torch/nn/module.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <optional>
#include <string>
#include <utility>

namespace ampt::models {

// The position-wise feed-forward of a block: n_embd → 4·n_embd → GELU → n_embd.
class GptMlpImpl : public torch::nn::Module {
 public:
  // `block`: its block's inventory entries (its Linears' names and shapes).
  GptMlpImpl(double dropout, bool tanh_gelu, const std::vector<LinearLayer>& block);
  torch::Tensor forward(const torch::Tensor& x);

  Linear c_fc{nullptr};
  Linear c_proj{nullptr};  // a residual projection: GPT-2 scales its init

  // Whether c_fc, the GELU and c_proj run as one operation: in the autocast dtype, one that on a
  // GPU recomputes the GELU's output in backward rather than keeping it (kernels/gelu_mlp.h; not
  // with fp32 islands), and that may use the GEMM epilogues where they apply (`epilogues`); with
  // both Linears in fp8 and the tanh GELU, one whose casts compute the GELU and its gradient
  // (precision/fp8_mlp.h).
  void set_fused(bool fused, bool epilogues) {
    fused_ = fused;
    epilogues_ = epilogues;
  }

 private:
  bool fused_ = true;
  bool epilogues_ = true;
  torch::nn::Dropout dropout_{nullptr};
  std::string gelu_approximate_;  // "tanh" (GPT-2's) or "none"
};
TORCH_MODULE(GptMlp);

// Pre-LayerNorm block: x + attn(ln_1(x)), then x + mlp(ln_2(x)).
class GptBlockImpl : public DecoderBlockImpl {
 public:
  GptBlockImpl(const GptDims& dims, const std::vector<LinearLayer>& block);
  BlockOutputs forward(const torch::Tensor& x, const BlockContext& context) override;
  // Attends through `cache` (CausalSelfAttention::forward_cached).
  torch::Tensor forward_cached(const torch::Tensor& x, const BlockContext& context,
                               std::pair<torch::Tensor, torch::Tensor>& cache) override;

  torch::nn::LayerNorm ln_1{nullptr};
  CausalSelfAttention attn{nullptr};
  torch::nn::LayerNorm ln_2{nullptr};
  GptMlp mlp{nullptr};
};
TORCH_MODULE(GptBlock);

// The decoder (decoder.h) with token + learned position embeddings, n_layer pre-LayerNorm
// blocks, a final LayerNorm, and a head that reuses the token embedding matrix (weight tying, as
// GPT-2): there is no separate head parameter, so the optimizer, the parameter count and the
// weight decay see the shared matrix once. Its logits cover the real vocabulary (vocab_size less
// its padding rows, which are not classes). Parameter names follow nanoGPT's (wte, wpe,
// h.N.attn.c_attn, ..., ln_f) without "transformer.".
class GptImpl : public DecoderImpl {
 public:
  // GPT-2 initialisation: weights normal(0, 0.02), the residual projections (attn.c_proj,
  // mlp.c_proj) normal(0, 0.02/sqrt(2·n_layer)) so the residual stream's variance does not grow
  // with depth, biases 0, LayerNorm weight 1 and bias 0.
  explicit GptImpl(const GptDims& dims);

  // The fused kernels (--fused_kernels): the head with the loss, and also each residual add
  // with the LayerNorm after it (kernels/add_layer_norm.h; not with fp32 islands, block hooks
  // or activation checkpointing, whose units are whole modules and blocks) and each MLP as one
  // operation (GptMlpImpl::set_fused), with the GEMM epilogues there and in the attention's
  // Linears (kernels/fused_linear.h) unless `epilogues` is false (--gemm_epilogues).
  void set_fused(bool fused, bool epilogues = true);

  const GptDims& dims() const { return dims_; }

 protected:
  torch::Tensor embed(const torch::Tensor& tokens, const TokenPositions& at) override;
  // The blocks and ln_f, each residual add fused with the LayerNorm that follows it
  // (kernels/add_layer_norm.h): the same values as the blocks one by one.
  std::optional<torch::Tensor> fused_blocks(const torch::Tensor& x,
                                            const BlockContext& context) override;
  torch::Tensor final_norm(const torch::Tensor& x) override;
  torch::Tensor head_weight() const override { return wte_->weight; }
  int64_t classes() const override { return dims_.real_vocab(); }
  const torch::nn::Module& head_module() const override { return *wte_; }
  c10::ScalarType activation_dtype() const override { return wte_->weight.scalar_type(); }

 private:
  GptDims dims_;
  torch::nn::Embedding wte_{nullptr};
  torch::nn::Embedding wpe_{nullptr};
  torch::nn::Dropout drop_{nullptr};
  torch::nn::LayerNorm ln_f_{nullptr};
};
TORCH_MODULE(Gpt);

}  // namespace ampt::models

#include "ampt/models/gpt.h"

#include "ampt/precision/fp8_mlp.h"
#include "ampt/precision/precision_islands.h"

#include "ampt/kernels/add_layer_norm.h"
#include "ampt/kernels/batch_invariant.h"
#include "ampt/kernels/gelu_mlp.h"
#include "ampt/models/activation_checkpoint.h"
#include "ampt/models/lora.h"

#include <torch/nn/functional/activation.h>
#include <torch/nn/init.h>

#include <cmath>

namespace ampt::models {

// The fp32-island hooks every submodule call goes through (precision/precision_islands.h).
using precision::call;
using precision::through_island;

namespace {

constexpr double kGptInitStd = 0.02;  // GPT-2's

torch::nn::LayerNorm layer_norm(const GptDims& dims) {
  return torch::nn::LayerNorm(torch::nn::LayerNormOptions({dims.n_embd}).eps(dims.layer_norm_eps));
}

// (residual + branch, norm(residual + branch)) in one pass (kernels/add_layer_norm.h).
kernels::AddLayerNormResult add_norm(const torch::Tensor& residual, const torch::Tensor& branch,
                                     const torch::nn::LayerNorm& norm) {
  return kernels::add_layer_norm(residual, branch, norm->weight, norm->bias, norm->options.eps());
}

// The attention through its island check, within the examples `packed` cuts the rows into.
torch::Tensor attend(CausalSelfAttention& attn, const torch::Tensor& x,
                     const PackedLayout& packed) {
  return through_island(*attn, x,
                        [&](const torch::Tensor& in) { return attn->forward(in, packed); });
}

}  // namespace

GptMlpImpl::GptMlpImpl(double dropout, bool tanh_gelu, const std::vector<LinearLayer>& block)
    : gelu_approximate_(tanh_gelu ? "tanh" : "none") {
  c_fc = register_declared(*this, block, LinearRole::fc);
  c_proj = register_declared(*this, block, LinearRole::down);
  dropout_ = register_module("dropout", torch::nn::Dropout(dropout));
}

torch::Tensor GptMlpImpl::forward(const torch::Tensor& x) {
  const kernels::GeluMlpWeights weights{c_fc->weight, c_fc->bias, c_proj->weight, c_proj->bias};
  const bool invariant = kernels::batch_invariant();
  if (fused_ && !invariant && c_fc->plain() && c_proj->plain()) {
    return dropout_->forward(kernels::gelu_mlp(x, weights, gelu_approximate_, epilogues_));
  }
  // The fp8 MLP has no place for an adapter's update: adapted layers go one by one.
  const bool adapted = lora_adapter(*c_fc) || lora_adapter(*c_proj);
  if (fused_ && !invariant && c_fc->fp8() && c_proj->fp8() && gelu_approximate_ == "tanh" && !adapted) {
    return dropout_->forward(precision::fp8_gelu_mlp(x, weights, c_fc->fp8(), c_proj->fp8(),
                                                     /*record=*/!recomputing()));
  }
  // The tanh approximation is GPT-2's own GELU (and llm.c's), so weights trained elsewhere
  // behave the same here.
  const auto h = c_fc->forward(x);
  return dropout_->forward(c_proj->forward(invariant ? kernels::invariant_gelu(h, gelu_approximate_)
                                                     : torch::gelu(h, gelu_approximate_)));
}

GptBlockImpl::GptBlockImpl(const GptDims& dims, const std::vector<LinearLayer>& block) {
  // The attention and the MLP are registered as the inventory's layer names say.
  const auto parent = [&](LinearRole role) { return module_path(layer_of(block, role)).front(); };
  ln_1 = register_module("ln_1", layer_norm(dims));
  attn = register_module(parent(LinearRole::qkv), CausalSelfAttention(dims.n_head, dims.dropout, block));
  ln_2 = register_module("ln_2", layer_norm(dims));
  mlp = register_module(parent(LinearRole::fc), GptMlp(dims.dropout, dims.tanh_gelu, block));
}

BlockOutputs GptBlockImpl::forward(const torch::Tensor& x, const BlockContext& context) {
  const auto h = x + attend(attn, call(ln_1, x), context.packed);
  return {h + call(mlp, call(ln_2, h))};
}

torch::Tensor GptBlockImpl::forward_cached(const torch::Tensor& x, const BlockContext& context,
                                           std::pair<torch::Tensor, torch::Tensor>& cache) {
  // Through the attention's island as forward() goes.
  const auto attended = through_island(*attn, call(ln_1, x), [&](const torch::Tensor& in) {
    return attn->forward_cached(in, context.cached, cache);
  });
  const auto h = x + attended;
  return h + call(mlp, call(ln_2, h));
}

GptImpl::GptImpl(const GptDims& dims) : DecoderImpl(dims.block_size, dims.dropout), dims_(dims) {
  wte_ = register_module("wte", torch::nn::Embedding(dims.vocab_size, dims.n_embd));
  wpe_ = register_module("wpe", torch::nn::Embedding(dims.block_size, dims.n_embd));
  drop_ = register_module("drop", torch::nn::Dropout(dims.dropout));
  const auto inventory = layer_inventory(dims);
  for (const auto& block : inventory.blocks) blocks_->push_back(GptBlock(dims, linears_of(inventory, block)));
  register_module("h", blocks_);
  ln_f_ = register_module("ln_f", layer_norm(dims));

  // LayerNorm's own defaults (ones, zeros) are already GPT-2's; everything else is redone.
  torch::NoGradGuard no_grad;
  for (auto& module : modules(/*include_self=*/false)) {
    if (auto* linear = module->as<torch::nn::Linear>()) {
      init_normal(linear->weight, kGptInitStd);
      torch::nn::init::zeros_(linear->bias);
    } else if (auto* embedding = module->as<torch::nn::Embedding>()) {
      torch::nn::init::normal_(embedding->weight, 0.0, kGptInitStd);
    }
  }
  const double residual_std = kGptInitStd / std::sqrt(2.0 * static_cast<double>(dims.n_layer));
  for (const auto& block : *blocks_) {
    auto* b = block->as<GptBlock>();
    init_normal(b->attn->c_proj->weight, residual_std);
    init_normal(b->mlp->c_proj->weight, residual_std);
  }
}

torch::Tensor GptImpl::embed(const torch::Tensor& tokens, const TokenPositions& at) {
  const auto where = at.per_row.defined()
                         ? at.per_row
                         : torch::arange(at.start, at.start + at.time, tokens.options());
  return drop_->forward(call(wte_, tokens) + call(wpe_, where));
}

torch::Tensor GptImpl::final_norm(const torch::Tensor& x) { return call(ln_f_, x); }

std::optional<torch::Tensor> GptImpl::fused_blocks(const torch::Tensor& input,
                                                   const BlockContext& context) {
  // Each residual add goes into the LayerNorm that reads its sum: ln_2 of the same block, ln_1
  // of the next one, ln_f after the last. Only the first block's ln_1 runs alone.
  auto x = input;
  auto normed = call(blocks_[0]->as<GptBlock>()->ln_1, x);
  for (size_t i = 0; i < blocks_->size(); ++i) {
    auto* b = blocks_[i]->as<GptBlock>();
    const auto attended = add_norm(x, attend(b->attn, normed, context.packed), b->ln_2);
    const auto& next = i + 1 < blocks_->size() ? blocks_[i + 1]->as<GptBlock>()->ln_1 : ln_f_;
    const auto out = add_norm(attended.sum, call(b->mlp, attended.normed), next);
    x = out.sum;
    normed = out.normed;
  }
  return normed;
}

void GptImpl::set_fused(bool fused, bool epilogues) {
  DecoderImpl::set_fused(fused);
  for (const auto& block : *blocks_) {
    auto* b = block->as<GptBlock>();
    b->mlp->set_fused(fused, epilogues);
    b->attn->set_fused(fused, fused && epilogues);
  }
}

}  // namespace ampt::models

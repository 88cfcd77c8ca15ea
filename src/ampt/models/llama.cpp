#include "ampt/models/llama.h"

#include "ampt/kernels/batch_invariant.h"


#include <torch/nn/functional/activation.h>
#include <torch/nn/init.h>


namespace ampt::models {

using precision::call;
using precision::through_island;

namespace {

constexpr double kLlamaInitStd = 0.02;  // transformers' initializer_range

}  // namespace

RmsNormImpl::RmsNormImpl(int64_t dim, double eps) : eps_(eps) {
  weight = register_parameter("weight", torch::ones({dim}));
}

torch::Tensor RmsNormImpl::forward(const torch::Tensor& x) {
  const auto h = x.to(torch::kFloat32);
  const auto normed = h * torch::rsqrt(h.pow(2).mean(-1, /*keepdim=*/true) + eps_);
  return weight * normed.to(x.scalar_type());
}

LlamaAttentionImpl::LlamaAttentionImpl(const LlamaDims& dims, const std::vector<LinearLayer>& block,
                                       AttentionSpec spec)
    : n_head_(dims.n_head), n_kv_head_(dims.n_kv_head), head_dim_(dims.head_dim()),
      dropout_(dims.dropout), spec_(spec) {
  q_proj = register_declared(*this, block, LinearRole::q);
  k_proj = register_declared(*this, block, LinearRole::k);
  v_proj = register_declared(*this, block, LinearRole::v);
  o_proj = register_declared(*this, block, LinearRole::o);
  if (dims.qk_norm) {
    q_norm = register_module("q_norm", RmsNorm(head_dim_, dims.rms_norm_eps));
    k_norm = register_module("k_norm", RmsNorm(head_dim_, dims.rms_norm_eps));
  }
}

torch::Tensor LlamaAttentionImpl::heads(const torch::Tensor& t, int64_t count) const {
  return t.view({t.size(0), t.size(1), count, head_dim_}).transpose(1, 2);
}

torch::Tensor LlamaAttentionImpl::normed(RmsNorm& norm, const torch::Tensor& heads) {
  if (!norm) return heads;
  // The norm's fp32 weight would promote half heads: they stay in their dtype, as autocast
  // would cast them for the attention.
  return call(norm, heads).to(heads.scalar_type());
}

torch::Tensor LlamaAttentionImpl::attend(const torch::Tensor& q, const torch::Tensor& k,
                                         const torch::Tensor& v, const PackedLayout& packed) {
  const double dropout = is_training() ? dropout_ : 0.0;
  // causal_attention's enable_gqa shares each key/value head among its group of query heads
  // without copying it n_head / n_kv_head times.
  return project_out(packed.packed() ? packed_attention(q, k, v, packed, dropout, spec_)
                                     : causal_attention(q, k, v, dropout, spec_));
}

torch::Tensor LlamaAttentionImpl::project_out(const torch::Tensor& y) {
  const int64_t batch = y.size(0), time = y.size(2);
  return o_proj->forward(y.transpose(1, 2).contiguous().view({batch, time, n_head_ * head_dim_}));
}

LlamaAttentionImpl::Qkv LlamaAttentionImpl::qkv(const torch::Tensor& x, const RotaryAngles& angles) {
  return {apply_rotary(normed(q_norm, heads(q_proj->forward(x), n_head_)), angles),
          apply_rotary(normed(k_norm, heads(k_proj->forward(x), n_kv_head_)), angles),
          heads(v_proj->forward(x), n_kv_head_)};
}

torch::Tensor LlamaAttentionImpl::forward(const torch::Tensor& x, const RotaryAngles& angles,
                                          const PackedLayout& packed) {
  const auto [q, k, v] = qkv(x, angles);
  return attend(q, k, v, packed);
}

torch::Tensor LlamaAttentionImpl::forward_cached(const torch::Tensor& x, const RotaryAngles& angles,
                                                 const CacheStep& step,
                                                 std::pair<torch::Tensor, torch::Tensor>& cache) {
  const auto [q, k, v] = qkv(x, angles);
  return project_out(cached_attention(q, k, v, cache, step, spec_));
}

LlamaMlpImpl::LlamaMlpImpl(const std::vector<LinearLayer>& block) {
  gate_proj = register_declared(*this, block, LinearRole::gate);
  up_proj = register_declared(*this, block, LinearRole::up);
  down_proj = register_declared(*this, block, LinearRole::down);
}

torch::Tensor LlamaMlpImpl::forward(const torch::Tensor& x) {
  const auto gate = gate_proj->forward(x);
  const auto activated = kernels::batch_invariant() ? kernels::invariant_silu(gate) : torch::silu(gate);
  return down_proj->forward(activated * up_proj->forward(x));
}

LlamaBlockImpl::LlamaBlockImpl(const LlamaDims& dims, int64_t layer,
                               const std::vector<LinearLayer>& block, const SparseLayers& sparse) {
  // The attention and the MLP are registered as the inventory's layer names say.
  const auto parent = [&](LinearRole role) { return module_path(layer_of(block, role)).front(); };
  input_layernorm = register_module("input_layernorm", RmsNorm(dims.n_embd, dims.rms_norm_eps));
  self_attn = register_module(parent(LinearRole::q), LlamaAttention(dims, block, dims.attention(layer)));
  post_attention_layernorm =
      register_module("post_attention_layernorm", RmsNorm(dims.n_embd, dims.rms_norm_eps));
  if (sparse.sparse()) {
    moe = register_module(module_path(sparse.router).front(), SparseMoe(dims, sparse));
  } else {
    mlp = register_module(parent(LinearRole::gate), LlamaMlp(block));
  }
}

BlockOutputs LlamaBlockImpl::mlp_residual(const torch::Tensor& h) {
  const auto normed = call(post_attention_layernorm, h);
  if (!moe) return {h + call(mlp, normed)};
  torch::Tensor router_logits;
  const auto y = through_island(*moe, normed, [&](const torch::Tensor& in) {
    auto out = moe->forward(in);
    router_logits = std::move(out.router_logits);
    return out.y;
  });
  return {h + y, router_logits};
}

BlockOutputs LlamaBlockImpl::forward(const torch::Tensor& x, const BlockContext& context) {
  const auto attended =
      through_island(*self_attn, call(input_layernorm, x), [&](const torch::Tensor& in) {
        return self_attn->forward(in, context.angles, context.packed);
      });
  return mlp_residual(x + attended);
}

torch::Tensor LlamaBlockImpl::forward_cached(const torch::Tensor& x, const BlockContext& context,
                                             std::pair<torch::Tensor, torch::Tensor>& cache) {
  // Through the attention's island as forward() goes.
  const auto attended =
      through_island(*self_attn, call(input_layernorm, x), [&](const torch::Tensor& in) {
        return self_attn->forward_cached(in, context.angles, context.cached, cache);
      });
  return mlp_residual(x + attended).front();
}

LlamaImpl::LlamaImpl(const LlamaDims& dims)
    : DecoderImpl(dims.block_size, dims.dropout), dims_(dims), inv_freq_(rope_inv_freq(dims)) {
  embed_tokens_ = register_module("embed_tokens", torch::nn::Embedding(dims.vocab_size, dims.n_embd));
  const auto inventory = layer_inventory(dims);
  for (int64_t i = 0; i < dims.n_layer; ++i) {
    const auto& block = inventory.blocks[i];
    blocks_->push_back(
        LlamaBlock(dims, i, linears_of(inventory, block), sparse_layers_of(inventory, block)));
  }
  register_module("layers", blocks_);
  norm_ = register_module("norm", RmsNorm(dims.n_embd, dims.rms_norm_eps));
  if (!dims.tied_head) {
    const auto head = torch::nn::LinearOptions(dims.n_embd, dims.vocab_size).bias(false);
    lm_head_ = register_module("lm_head", torch::nn::Linear(head));
  }

  torch::NoGradGuard no_grad;
  for (auto& module : modules(/*include_self=*/false)) {
    if (auto* l = module->as<torch::nn::Linear>()) {
      init_normal(l->weight, kLlamaInitStd);
      if (l->bias.defined()) torch::nn::init::zeros_(l->bias);
    } else if (auto* embedding = module->as<torch::nn::Embedding>()) {
      torch::nn::init::normal_(embedding->weight, 0.0, kLlamaInitStd);
    }
  }
}

torch::Tensor LlamaImpl::embed(const torch::Tensor& tokens, const TokenPositions&) {
  return call(embed_tokens_, tokens);
}

BlockContext LlamaImpl::block_context(const TokenPositions& at, PackedLayout packed) {
  const auto& inv_freq = inv_freq_on(at.device);
  auto angles = at.per_row.defined() ? rotary_angles(inv_freq, at.per_row)
                                     : rotary_angles(inv_freq, at.start, at.time);
  return {std::move(packed), std::move(angles), {}};
}

torch::Tensor LlamaImpl::final_norm(const torch::Tensor& x) { return call(norm_, x); }

std::vector<std::string> LlamaImpl::auxiliary_figure_names() const {
  const auto& moe = dims_.moe;
  if (!moe.active()) return {};
  if (dims_.router_z_loss_coef == 0) return {"aux_loss", "expert_load/max", "expert_load/min"};
  return {"aux_loss", "z_loss", "expert_load/max", "expert_load/min"};
}

AuxiliaryLoss LlamaImpl::auxiliary_loss(const std::vector<torch::Tensor>& reports) const {
  if (reports.empty()) return {};
  const auto& moe = dims_.moe;
  const auto balance = load_balance(reports, moe.top_k);
  auto loss = moe.aux_loss_coef * balance.loss;
  std::vector<torch::Tensor> figures{balance.loss.detach()};
  if (dims_.router_z_loss_coef != 0) {
    const auto z = router_z_loss(reports);
    loss = loss + dims_.router_z_loss_coef * z;
    figures.push_back(z.detach());
  }
  figures.push_back(balance.load[0]);
  figures.push_back(balance.load[1]);
  return {loss, torch::stack(figures)};
}

const torch::Tensor& LlamaImpl::inv_freq_on(const torch::Device& device) {
  // Moved once, not copied to the GPU at every forward: it is no parameter or buffer, which
  // module->to() would move.
  if (inv_freq_.device() != device) inv_freq_ = inv_freq_.to(device);
  return inv_freq_;
}

const torch::nn::Module& LlamaImpl::head_module() const {
  return dims_.tied_head ? static_cast<const torch::nn::Module&>(*embed_tokens_) : *lm_head_;
}

torch::Tensor LlamaImpl::head_weight() const {
  return dims_.tied_head ? embed_tokens_->weight : lm_head_->weight;
}

}  // namespace ampt::models

#include "ampt/models/llama.h"

#include "ampt/core/errors.h"
#include "ampt/kernels/fused_classifier.h"
#include "ampt/kernels/fused_linear.h"
#include "ampt/models/activation_checkpoint.h"
#include "ampt/models/attention.h"

#include <ATen/ops/scaled_dot_product_attention.h>
#include <fmt/format.h>
#include <torch/nn/functional/activation.h>
#include <torch/nn/init.h>

#include <algorithm>

namespace ampt::models {

using precision::active_islands;
using precision::call;
using precision::IslandScope;
using precision::through_island;

namespace {

constexpr double kInitStd = 0.02;  // transformers' initializer_range

torch::nn::Linear linear(int64_t in, int64_t out, bool bias) {
  return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(bias));
}

}  // namespace

RmsNormImpl::RmsNormImpl(int64_t dim, double eps) : eps_(eps) {
  weight = register_parameter("weight", torch::ones({dim}));
}

torch::Tensor RmsNormImpl::forward(const torch::Tensor& x) {
  const auto h = x.to(torch::kFloat32);
  const auto normed = h * torch::rsqrt(h.pow(2).mean(-1, /*keepdim=*/true) + eps_);
  return weight * normed.to(x.scalar_type());
}

LlamaAttentionImpl::LlamaAttentionImpl(const LlamaDims& dims)
    : n_head_(dims.n_head), n_kv_head_(dims.n_kv_head), head_dim_(dims.head_dim()),
      dropout_(dims.dropout) {
  const int64_t kv = dims.n_kv_head * head_dim_;
  q_proj = register_module("q_proj", linear(dims.n_embd, dims.n_embd, dims.qkv_bias));
  k_proj = register_module("k_proj", linear(dims.n_embd, kv, dims.qkv_bias));
  v_proj = register_module("v_proj", linear(dims.n_embd, kv, dims.qkv_bias));
  o_proj = register_module("o_proj", linear(dims.n_embd, dims.n_embd, dims.o_bias));
}

torch::Tensor LlamaAttentionImpl::heads(const torch::Tensor& t, int64_t count) const {
  return t.view({t.size(0), t.size(1), count, head_dim_}).transpose(1, 2);
}

torch::Tensor LlamaAttentionImpl::attend(const torch::Tensor& q, const torch::Tensor& k,
                                         const torch::Tensor& v, bool causal,
                                         const PackedLayout& packed) {
  const double dropout = is_training() ? dropout_ : 0.0;
  // is_causal lets SDPA pick flash attention on a GPU; enable_gqa shares each key/value head
  // among its group of query heads without copying it n_head / n_kv_head times.
  const auto y = packed.packed()
                     ? packed_attention(q, k, v, packed, dropout)
                     : at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, dropout, causal,
                                                        /*scale=*/std::nullopt,
                                                        /*enable_gqa=*/n_kv_head_ != n_head_);
  const int64_t batch = y.size(0), time = y.size(2);
  return project(o_proj, fp8_o, y.transpose(1, 2).contiguous().view({batch, time, n_head_ * head_dim_}));
}

LlamaAttentionImpl::Qkv LlamaAttentionImpl::qkv(const torch::Tensor& x, const RotaryAngles& angles) {
  return {apply_rotary(heads(project(q_proj, fp8_q, x), n_head_), angles),
          apply_rotary(heads(project(k_proj, fp8_k, x), n_kv_head_), angles),
          heads(project(v_proj, fp8_v, x), n_kv_head_)};
}

torch::Tensor LlamaAttentionImpl::forward(const torch::Tensor& x, const RotaryAngles& angles,
                                          const PackedLayout& packed) {
  const auto [q, k, v] = qkv(x, angles);
  return attend(q, k, v, /*causal=*/true, packed);
}

torch::Tensor LlamaAttentionImpl::forward_cached(const torch::Tensor& x, const RotaryAngles& angles,
                                                 std::pair<torch::Tensor, torch::Tensor>& cache) {
  auto& [keys, values] = cache;
  const bool first = !keys.defined();
  const auto [q, k, v] = qkv(x, angles);
  keys = first ? k : torch::cat({keys, k}, 2);
  values = first ? v : torch::cat({values, v}, 2);
  // The prompt attends causally within itself; a later position attends to all it follows.
  return attend(q, keys, values, /*causal=*/first && x.size(1) > 1);
}

LlamaMlpImpl::LlamaMlpImpl(const LlamaDims& dims) {
  gate_proj = register_module("gate_proj", linear(dims.n_embd, dims.intermediate, false));
  up_proj = register_module("up_proj", linear(dims.n_embd, dims.intermediate, false));
  down_proj = register_module("down_proj", linear(dims.intermediate, dims.n_embd, false));
}

torch::Tensor LlamaMlpImpl::forward(const torch::Tensor& x) {
  return project(down_proj, fp8_down,
                 torch::silu(project(gate_proj, fp8_gate, x)) * project(up_proj, fp8_up, x));
}

LlamaBlockImpl::LlamaBlockImpl(const LlamaDims& dims) {
  input_layernorm = register_module("input_layernorm", RmsNorm(dims.n_embd, dims.rms_norm_eps));
  self_attn = register_module("self_attn", LlamaAttention(dims));
  post_attention_layernorm =
      register_module("post_attention_layernorm", RmsNorm(dims.n_embd, dims.rms_norm_eps));
  mlp = register_module("mlp", LlamaMlp(dims));
}

torch::Tensor LlamaBlockImpl::forward(const torch::Tensor& x, const RotaryAngles& angles,
                                      const PackedLayout& packed) {
  const auto attended = through_island(*self_attn, call(input_layernorm, x), [&](const torch::Tensor& in) {
    return self_attn->forward(in, angles, packed);
  });
  const auto h = x + attended;
  return h + call(mlp, call(post_attention_layernorm, h));
}

torch::Tensor LlamaBlockImpl::forward_cached(const torch::Tensor& x, const RotaryAngles& angles,
                                             std::pair<torch::Tensor, torch::Tensor>& cache) {
  const auto h = x + self_attn->forward_cached(call(input_layernorm, x), angles, cache);
  return h + call(mlp, call(post_attention_layernorm, h));
}

LlamaImpl::LlamaImpl(const LlamaDims& dims) : dims_(dims), inv_freq_(rope_inv_freq(dims)) {
  embed_tokens_ = register_module("embed_tokens", torch::nn::Embedding(dims.vocab_size, dims.n_embd));
  for (int64_t i = 0; i < dims.n_layer; ++i) layers_->push_back(LlamaBlock(dims));
  register_module("layers", layers_);
  norm_ = register_module("norm", RmsNorm(dims.n_embd, dims.rms_norm_eps));
  if (!dims.tied_head) lm_head_ = register_module("lm_head", linear(dims.n_embd, dims.vocab_size, false));

  torch::NoGradGuard no_grad;
  for (auto& module : modules(/*include_self=*/false)) {
    if (auto* l = module->as<torch::nn::Linear>()) {
      torch::nn::init::normal_(l->weight, 0.0, kInitStd);
      if (l->bias.defined()) torch::nn::init::zeros_(l->bias);
    } else if (auto* embedding = module->as<torch::nn::Embedding>()) {
      torch::nn::init::normal_(embedding->weight, 0.0, kInitStd);
    }
  }
}

torch::Tensor LlamaImpl::hidden(const torch::Tensor& tokens, const torch::Tensor& positions,
                                const torch::Tensor& starts) {
  const int64_t time = tokens.size(1);
  if (time > dims_.block_size) {
    throw RuntimeError(fmt::format("a block of {} tokens exceeds the model's context block_size {}",
                                   time, dims_.block_size));
  }
  const auto packed = packed_layout(positions, starts, embed_tokens_->weight.scalar_type());
  const auto& inv_freq = inv_freq_on(tokens.device());
  const auto angles =
      packed.packed() ? rotary_angles(inv_freq, positions) : rotary_angles(inv_freq, 0, time);
  auto x = call(embed_tokens_, tokens);
  const bool checkpointed = grad_ckpt_ && is_training() && torch::GradMode::is_enabled();
  for (size_t i = 0; i < layers_->size(); ++i) {
    auto* block = layers_[i]->as<LlamaBlock>();
    const auto run = [block, angles, packed,
                      islands = active_islands()](const torch::Tensor& input) {
      // A recomputation in backward may run on another thread: it takes this pass's islands.
      IslandScope scope(islands);
      return block->forward(input, angles, packed);
    };
    x = run_block(block_hooks_, i, run, x, block->parameters(), checkpointed,
                  /*preserve_rng=*/dims_.dropout > 0.0);
  }
  return call(norm_, x);
}

std::vector<std::string> LlamaImpl::block_names() const {
  std::vector<std::string> names;
  for (size_t i = 0; i < layers_->size(); ++i) names.push_back(fmt::format("layers.{}", i));
  return names;
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

torch::Tensor LlamaImpl::forward(const torch::Tensor& tokens) {
  return through_island(head_module(), hidden(tokens, {}, {}),
                        [&](const torch::Tensor& h) {
                          return kernels::linear(h, head_weight(), {});
                        });
}

torch::Tensor LlamaImpl::loss(const torch::Tensor& tokens, const torch::Tensor& targets,
                              const torch::Tensor& positions, const torch::Tensor& starts) {
  const auto h = hidden(tokens, positions, starts);
  return through_island(head_module(), h, [&](const torch::Tensor& x) {
    if (!fused_) {
      return kernels::checked_cross_entropy(kernels::linear(x, head_weight(), {}).flatten(0, -2),
                                            targets.flatten());
    }
    return kernels::classifier_loss(x.flatten(0, -2), head_weight(), targets.flatten(),
                                    {dims_.vocab_size, 0, fp8_head_});
  });
}

torch::Tensor LlamaImpl::next_logits(const torch::Tensor& tokens, KvCache& cache) {
  const int64_t time = tokens.size(1), end = cache.length + time;
  if (end > dims_.block_size) {
    throw RuntimeError(fmt::format("generating position {} exceeds the model's context block_size "
                                   "{}: shorten the prompt or max_new_tokens",
                                   end, dims_.block_size));
  }
  const auto angles = rotary_angles(inv_freq_on(tokens.device()), cache.length, time);
  auto x = call(embed_tokens_, tokens);
  cache.layers.resize(layers_->size());
  for (size_t i = 0; i < layers_->size(); ++i) {
    x = layers_[i]->as<LlamaBlock>()->forward_cached(x, angles, cache.layers[i]);
  }
  cache.length = end;
  return kernels::linear(call(norm_, x.select(1, time - 1)), head_weight(), {});
}

std::vector<precision::Fp8Candidate> LlamaImpl::fp8_candidates() const {
  const int64_t c = dims_.n_embd, kv = dims_.n_kv_head * dims_.head_dim(), f = dims_.intermediate;
  std::vector<precision::Fp8Candidate> candidates;
  for (int64_t i = 0; i < dims_.n_layer; ++i) {
    const auto block = fmt::format("layers.{}.", i);
    candidates.push_back({block + "self_attn.q_proj", c, c});
    candidates.push_back({block + "self_attn.k_proj", c, kv});
    candidates.push_back({block + "self_attn.v_proj", c, kv});
    candidates.push_back({block + "self_attn.o_proj", c, c});
    candidates.push_back({block + "mlp.gate_proj", c, f});
    candidates.push_back({block + "mlp.up_proj", c, f});
    candidates.push_back({block + "mlp.down_proj", f, c});
  }
  if (fused_ && dims_.vocab_size % 16 == 0) candidates.push_back({"head", c, dims_.vocab_size});
  return candidates;
}

void LlamaImpl::enable_fp8(const precision::Fp8Recipe& recipe, const precision::Fp8Selected& selected) {
  for (size_t i = 0; i < layers_->size(); ++i) {
    auto* b = layers_[i]->as<LlamaBlock>();
    const auto block = fmt::format("layers.{}.", i);
    const auto layer = [&](const std::string& name) { return fp8_layer(recipe, selected(block + name)); };
    b->self_attn->fp8_q = layer("self_attn.q_proj");
    b->self_attn->fp8_k = layer("self_attn.k_proj");
    b->self_attn->fp8_v = layer("self_attn.v_proj");
    b->self_attn->fp8_o = layer("self_attn.o_proj");
    b->mlp->fp8_gate = layer("mlp.gate_proj");
    b->mlp->fp8_up = layer("mlp.up_proj");
    b->mlp->fp8_down = layer("mlp.down_proj");
  }
  fp8_head_ = std::ranges::any_of(fp8_candidates(), [&](const auto& c) {
    return c.name == "head" && selected(c.name);
  });
}

}  // namespace ampt::models

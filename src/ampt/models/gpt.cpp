#include "ampt/models/gpt.h"

#include "ampt/precision/fp8_mlp.h"
#include "ampt/precision/precision_islands.h"

#include "ampt/core/errors.h"
#include "ampt/kernels/add_layer_norm.h"
#include "ampt/kernels/fused_classifier.h"
#include "ampt/kernels/fused_linear.h"
#include "ampt/kernels/gelu_mlp.h"
#include "ampt/models/activation_checkpoint.h"
#include "ampt/models/lora.h"

#include <fmt/format.h>
#include <torch/nn/functional/activation.h>
#include <torch/nn/init.h>

#include <algorithm>
#include <cmath>

namespace ampt::models {

// The fp32-island hooks every submodule call goes through (precision/precision_islands.h).
using precision::active_islands;
using precision::call;
using precision::IslandScope;
using precision::through_island;

namespace {

constexpr double kInitStd = 0.02;  // GPT-2's

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

GptMlpImpl::GptMlpImpl(int64_t n_embd, double dropout, bool tanh_gelu)
    : gelu_approximate_(tanh_gelu ? "tanh" : "none") {
  c_fc = register_module("c_fc", torch::nn::Linear(n_embd, 4 * n_embd));
  c_proj = register_module("c_proj", torch::nn::Linear(4 * n_embd, n_embd));
  dropout_ = register_module("dropout", torch::nn::Dropout(dropout));
}

torch::Tensor GptMlpImpl::forward(const torch::Tensor& x) {
  const auto* islands = active_islands();
  const bool fp32_linear = islands != nullptr && (islands->find(c_fc.get()) != nullptr ||
                                                  islands->find(c_proj.get()) != nullptr);
  const kernels::GeluMlpWeights weights{c_fc->weight, c_fc->bias, c_proj->weight, c_proj->bias};
  // The fused MLPs have no place for an adapter's update: adapted layers go through project.
  const bool adapted = lora_adapter(*c_fc) || lora_adapter(*c_proj);
  if (fused_ && !fp8_fc_ && !fp8_proj_ && !fp32_linear && !adapted) {
    return dropout_->forward(kernels::gelu_mlp(x, weights, gelu_approximate_, epilogues_));
  }
  if (fused_ && fp8_fc_ && fp8_proj_ && gelu_approximate_ == "tanh" && !adapted) {
    return dropout_->forward(
        precision::fp8_gelu_mlp(x, weights, fp8_fc_, fp8_proj_, /*record=*/!recomputing()));
  }
  // The tanh approximation is GPT-2's own GELU (and llm.c's), so weights trained elsewhere
  // behave the same here.
  return dropout_->forward(
      project(c_proj, fp8_proj_, torch::gelu(project(c_fc, fp8_fc_, x), gelu_approximate_)));
}

void GptMlpImpl::enable_fp8(const precision::Fp8Recipe& recipe,
                            const precision::Fp8Selected& selected, const std::string& prefix) {
  fp8_fc_ = fp8_layer(recipe, selected(prefix + "c_fc"));
  fp8_proj_ = fp8_layer(recipe, selected(prefix + "c_proj"));
}

GptBlockImpl::GptBlockImpl(const GptDims& dims) {
  ln_1 = register_module("ln_1", layer_norm(dims));
  attn = register_module("attn", CausalSelfAttention(dims.n_embd, dims.n_head, dims.dropout));
  ln_2 = register_module("ln_2", layer_norm(dims));
  mlp = register_module("mlp", GptMlp(dims.n_embd, dims.dropout, dims.tanh_gelu));
}

torch::Tensor GptBlockImpl::forward(const torch::Tensor& x, const PackedLayout& packed) {
  const auto h = x + attend(attn, call(ln_1, x), packed);
  return h + call(mlp, call(ln_2, h));
}

torch::Tensor GptBlockImpl::forward_cached(const torch::Tensor& x,
                                           std::pair<torch::Tensor, torch::Tensor>& cache) {
  const auto h = x + attn->forward_cached(call(ln_1, x), cache);
  return h + call(mlp, call(ln_2, h));
}

GptImpl::GptImpl(const GptDims& dims) : dims_(dims) {
  wte_ = register_module("wte", torch::nn::Embedding(dims.vocab_size, dims.n_embd));
  wpe_ = register_module("wpe", torch::nn::Embedding(dims.block_size, dims.n_embd));
  drop_ = register_module("drop", torch::nn::Dropout(dims.dropout));
  for (int64_t i = 0; i < dims.n_layer; ++i) {
    h_->push_back(GptBlock(dims));
  }
  register_module("h", h_);
  ln_f_ = register_module("ln_f", layer_norm(dims));

  // LayerNorm's own defaults (ones, zeros) are already GPT-2's; everything else is redone.
  torch::NoGradGuard no_grad;
  for (auto& module : modules(/*include_self=*/false)) {
    if (auto* linear = module->as<torch::nn::Linear>()) {
      torch::nn::init::normal_(linear->weight, 0.0, kInitStd);
      torch::nn::init::zeros_(linear->bias);
    } else if (auto* embedding = module->as<torch::nn::Embedding>()) {
      torch::nn::init::normal_(embedding->weight, 0.0, kInitStd);
    }
  }
  const double residual_std = kInitStd / std::sqrt(2.0 * static_cast<double>(dims.n_layer));
  for (const auto& block : *h_) {
    auto* b = block->as<GptBlock>();
    torch::nn::init::normal_(b->attn->c_proj->weight, 0.0, residual_std);
    torch::nn::init::normal_(b->mlp->c_proj->weight, 0.0, residual_std);
  }
}

torch::Tensor GptImpl::hidden(const torch::Tensor& tokens, const torch::Tensor& positions,
                              const torch::Tensor& starts) {
  const int64_t time = tokens.size(1);
  if (time > dims_.block_size) {
    throw RuntimeError(fmt::format("a block of {} tokens exceeds the model's context block_size {}",
                                   time, dims_.block_size));
  }
  const auto packed = packed_layout(positions, starts, wte_->weight.scalar_type());
  const auto where = packed.packed() ? positions : torch::arange(time, tokens.options());
  auto x = drop_->forward(call(wte_, tokens) + call(wpe_, where));
  const bool checkpointed = grad_ckpt_ && is_training() && torch::GradMode::is_enabled();
  // Islands decide per module what runs in fp32; the fused adds would hand them half inputs.
  const auto* islands = active_islands();
  if (fused_ && !checkpointed && !h_->is_empty() && block_hooks_ == nullptr &&
      (islands == nullptr || islands->list().empty())) {
    return fused_blocks(x, packed);
  }
  for (size_t i = 0; i < h_->size(); ++i) {
    auto* b = h_[i]->as<GptBlock>();
    // A recomputation in backward may run on another thread: it takes this pass's islands.
    const auto run = [b, islands, packed](const torch::Tensor& input) {
      IslandScope scope(islands);
      return through_island(*b, input,
                            [&](const torch::Tensor& in) { return b->forward(in, packed); });
    };
    x = run_block(block_hooks_, i, run, x, b->parameters(), checkpointed,
                  /*preserve_rng=*/dims_.dropout > 0.0);
  }
  return call(ln_f_, x);
}

std::vector<std::string> GptImpl::block_names() const {
  std::vector<std::string> names;
  for (size_t i = 0; i < h_->size(); ++i) names.push_back(fmt::format("h.{}", i));
  return names;
}

torch::Tensor GptImpl::fused_blocks(torch::Tensor x, const PackedLayout& packed) {
  // Each residual add goes into the LayerNorm that reads its sum: ln_2 of the same block, ln_1
  // of the next one, ln_f after the last. Only the first block's ln_1 runs alone.
  auto normed = call(h_[0]->as<GptBlock>()->ln_1, x);
  for (size_t i = 0; i < h_->size(); ++i) {
    auto* b = h_[i]->as<GptBlock>();
    const auto attended = add_norm(x, attend(b->attn, normed, packed), b->ln_2);
    const auto& next = i + 1 < h_->size() ? h_[i + 1]->as<GptBlock>()->ln_1 : ln_f_;
    const auto out = add_norm(attended.sum, call(b->mlp, attended.normed), next);
    x = out.sum;
    normed = out.normed;
  }
  return normed;
}

torch::Tensor GptImpl::forward(const torch::Tensor& tokens) {
  // The head is wte used backwards (tied weights), so it shares wte's island, if any. Padding
  // rows of a vocabulary rounded up are not classes: the logits cover the real tokens only.
  return through_island(*wte_, hidden(tokens, {}, {}), [&](const torch::Tensor& h) {
    return kernels::linear(h, real_vocab_weight(), {});
  });
}

torch::Tensor GptImpl::loss(const torch::Tensor& tokens, const torch::Tensor& targets,
                           const torch::Tensor& positions, const torch::Tensor& starts) {
  const auto h = hidden(tokens, positions, starts);
  return through_island(*wte_, h, [&](const torch::Tensor& x) {
    if (!fused_) {
      return kernels::checked_cross_entropy(
          kernels::linear(x, real_vocab_weight(), {}).flatten(0, -2), targets.flatten());
    }
    return kernels::classifier_loss(x.flatten(0, -2), wte_->weight, targets.flatten(),
                                    {dims_.real_vocab(), 0, fp8_head_});
  });
}

torch::Tensor GptImpl::next_logits(const torch::Tensor& tokens, KvCache& cache) {
  const int64_t time = tokens.size(1), end = cache.length + time;
  if (end > dims_.block_size) {
    throw RuntimeError(fmt::format("generating position {} exceeds the model's context block_size "
                                   "{}: shorten the prompt or max_new_tokens",
                                   end, dims_.block_size));
  }
  const auto positions = torch::arange(cache.length, end, tokens.options());
  auto x = call(wte_, tokens) + call(wpe_, positions);
  cache.layers.resize(h_->size());
  for (size_t i = 0; i < h_->size(); ++i) {
    x = h_[i]->as<GptBlock>()->forward_cached(x, cache.layers[i]);
  }
  cache.length = end;
  return kernels::linear(call(ln_f_, x.select(1, time - 1)), real_vocab_weight(), {});
}

void GptImpl::set_fused(bool fused, bool epilogues) {
  fused_ = fused;
  for (const auto& block : *h_) {
    auto* b = block->as<GptBlock>();
    b->mlp->set_fused(fused, epilogues);
    b->attn->set_fused(fused, fused && epilogues);
  }
}

torch::Tensor GptImpl::real_vocab_weight() const {
  return dims_.real_vocab() == dims_.vocab_size ? wte_->weight
                                                : wte_->weight.narrow(0, 0, dims_.real_vocab());
}

std::vector<precision::Fp8Candidate> GptImpl::fp8_candidates() const {
  const int64_t c = dims_.n_embd;
  std::vector<precision::Fp8Candidate> candidates;
  for (int64_t i = 0; i < dims_.n_layer; ++i) {
    const auto block = fmt::format("h.{}.", i);
    candidates.push_back({block + "attn.c_attn", c, 3 * c});
    candidates.push_back({block + "attn.c_proj", c, c});
    candidates.push_back({block + "mlp.c_fc", c, 4 * c});
    candidates.push_back({block + "mlp.c_proj", 4 * c, c});
  }
  if (fused_ && dims_.vocab_size % 16 == 0) candidates.push_back({"head", c, dims_.vocab_size});
  return candidates;
}

void GptImpl::enable_fp8(const precision::Fp8Recipe& recipe,
                         const precision::Fp8Selected& selected) {
  for (size_t i = 0; i < h_->size(); ++i) {
    auto* b = h_[i]->as<GptBlock>();
    const auto block = fmt::format("h.{}.", i);
    b->attn->enable_fp8(recipe, selected, block + "attn.");
    b->mlp->enable_fp8(recipe, selected, block + "mlp.");
  }
  fp8_head_ = std::ranges::any_of(fp8_candidates(), [&](const auto& c) {
    return c.name == "head" && selected(c.name);
  });
}

}  // namespace ampt::models

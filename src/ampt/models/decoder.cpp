#include "ampt/models/decoder.h"

#include "ampt/core/errors.h"
#include "ampt/kernels/batch_invariant.h"
#include "ampt/kernels/fused_classifier.h"
#include "ampt/kernels/fused_linear.h"
#include "ampt/precision/precision_islands.h"

#include <fmt/format.h>

namespace ampt::models {

using precision::active_islands;
using precision::IslandScope;
using precision::through_island;

torch::Tensor DecoderImpl::hidden(const torch::Tensor& tokens, const torch::Tensor& positions,
                                  const torch::Tensor& starts, std::vector<torch::Tensor>* reports) {
  const int64_t time = tokens.size(1);
  if (time > context_) {
    throw RuntimeError(fmt::format("a block of {} tokens exceeds the model's context block_size {}",
                                   time, context_));
  }
  auto packed = packed_layout(positions, starts, activation_dtype());
  const TokenPositions at{0, time, packed.packed() ? positions : torch::Tensor(), tokens.device()};
  auto x = embed(tokens, at);
  const auto context = block_context(at, std::move(packed));
  const bool checkpointed = grad_ckpt_ && is_training() && torch::GradMode::is_enabled();
  // Islands decide per module what runs in fp32; a fused sequence would hand them half inputs.
  const auto* islands = active_islands();
  // Exact mode runs each operation through its own batch-invariant kernel.
  const bool invariant = kernels::batch_invariant();
  if (fused_ && !invariant && !checkpointed && !blocks_->is_empty() && block_hooks_ == nullptr &&
      (islands == nullptr || islands->list().empty())) {
    if (auto out = fused_blocks(x, context)) return *out;
  }
  for (size_t i = 0; i < blocks_->size(); ++i) {
    auto* block = blocks_[i]->as<DecoderBlockImpl>();
    // A recomputation in backward may run on another thread: it takes this pass's islands and
    // mode.
    const auto run = [block, islands, invariant, context](const torch::Tensor& input) {
      IslandScope scope(islands);
      const kernels::BatchInvariantScope mode(invariant);
      BlockOutputs out;
      // A block's fp32 island casts its output; its reports pass as they are.
      auto y = through_island(*block, input, [&](const torch::Tensor& in) {
        out = block->forward(in, context);
        return out.front();
      });
      out.front() = std::move(y);
      return out;
    };
    auto outputs = run_block(block_hooks_, i, run, x, block->parameters(), checkpointed,
                             /*preserve_rng=*/dropout_ > 0.0);
    x = outputs.front();
    if (reports != nullptr) reports->insert(reports->end(), outputs.begin() + 1, outputs.end());
  }
  return final_norm(x);
}

torch::Tensor DecoderImpl::class_weight() const {
  const auto weight = head_weight();
  return classes() == weight.size(0) ? weight : weight.narrow(0, 0, classes());
}

torch::Tensor DecoderImpl::head(const torch::Tensor& h) const {
  return through_island(head_module(), h, [&](const torch::Tensor& in) {
    return kernels::linear(in, class_weight(), {});
  });
}

torch::Tensor DecoderImpl::forward(const torch::Tensor& tokens) { return logits(tokens, {}, {}); }

torch::Tensor DecoderImpl::logits(const torch::Tensor& tokens, const torch::Tensor& positions,
                                  const torch::Tensor& starts, const torch::Tensor& rows) {
  const auto h = hidden(tokens, positions, starts);
  return head(rows.defined() ? h.flatten(0, -2).index_select(0, rows) : h);
}

torch::Tensor DecoderImpl::loss(const torch::Tensor& tokens, const torch::Tensor& targets,
                                const torch::Tensor& positions, const torch::Tensor& starts) {
  return loss_terms(tokens, targets, positions, starts).loss;
}

LossTerms DecoderImpl::loss_terms(const torch::Tensor& tokens, const torch::Tensor& targets,
                                  const torch::Tensor& positions, const torch::Tensor& starts) {
  std::vector<torch::Tensor> reports;
  const auto h = hidden(tokens, positions, starts, &reports);
  auto loss = through_island(head_module(), h, [&](const torch::Tensor& x) {
    if (!fused_) {
      return kernels::checked_cross_entropy(kernels::linear(x, class_weight(), {}).flatten(0, -2),
                                            targets.flatten());
    }
    return kernels::classifier_loss(x, head_weight(), targets, {classes(), 0, fp8_head_});
  });
  auto aux = auxiliary_loss(reports);
  if (aux.loss.defined()) loss = loss + aux.loss;
  return {std::move(loss), std::move(aux.figures)};
}

namespace {

// Which keys [0, end) each new position [held, end) of a cached forward may attend to, where
// rows start at `first` (left padding) or new positions follow held ones: [B or 1, 1, T_new,
// end] bool; undefined where SDPA's causal flag (an empty cache) or no mask (one new position)
// says it.
torch::Tensor cache_mask(const torch::Tensor& first, int64_t held, int64_t end,
                         const torch::Device& device) {
  const int64_t time = end - held;
  if (!first.defined() && (held == 0 || time == 1)) return {};
  const auto options = torch::dtype(torch::kInt64).device(device);
  const auto query = torch::arange(held, end, options).view({1, 1, time, 1});
  const auto key = torch::arange(0, end, options).view({1, 1, 1, end});
  auto mask = key <= query;
  if (!first.defined()) return mask;
  // A padding position attends to itself alone: a query that sees no key gets NaN from the
  // softmax, and its value would carry the NaN into real positions' sums even at weight 0.
  return mask.logical_and((key >= first.view({-1, 1, 1, 1})).logical_or(key == query));
}

}  // namespace

torch::Tensor DecoderImpl::next_logits(const torch::Tensor& tokens, KvCache& cache) {
  const int64_t time = tokens.size(1), end = cache.length + time;
  if (end > context_) {
    throw RuntimeError(fmt::format("generating position {} exceeds the model's context block_size "
                                   "{}: shorten the prompt or max_new_tokens",
                                   end, context_));
  }
  const auto device = tokens.device();
  torch::Tensor per_row;
  if (cache.first.defined()) {
    per_row = (torch::arange(cache.length, end, tokens.options()).unsqueeze(0) -
               cache.first.unsqueeze(1))
                  .clamp_min(0);
  }
  const TokenPositions at{cache.length, time, per_row, device};
  auto x = embed(tokens, at);
  auto context = block_context(at, {});
  context.cached = {cache.length, cache.capacity > 0 ? cache.capacity : context_,
                    cache_mask(cache.first, cache.length, end, device), cache.first};
  cache.layers.resize(blocks_->size());
  // As hidden() runs them: each block through its hooks (ZeRO-3's gathers) and its fp32 island.
  for (size_t i = 0; i < blocks_->size(); ++i) {
    auto* block = blocks_[i]->as<DecoderBlockImpl>();
    auto& layer = cache.layers[i];
    const auto run = [&](const torch::Tensor& input) {
      return BlockOutputs{through_island(*block, input, [&](const torch::Tensor& in) {
        return block->forward_cached(in, context, layer);
      })};
    };
    x = run_block(block_hooks_, i, run, x, block->parameters(), /*checkpointed=*/false,
                  /*preserve_rng=*/false)
            .front();
  }
  cache.length = end;
  return head(final_norm(x.select(1, time - 1)));
}

}  // namespace ampt::models

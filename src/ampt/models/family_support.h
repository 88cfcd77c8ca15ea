// What the families' files (<family>_family.cpp) share: the check that a model can take the
// data it is given, a Model's forward and classifier loss from a module holder, and a decoder's
// whole Model.
#pragma once

#include "ampt/config/config.h"
#include "ampt/core/errors.h"
#include "ampt/data/dataset.h"
#include "ampt/models/layer_inventory.h"
#include "ampt/models/registry.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/nn/functional/loss.h>

#include <functional>
#include <string>
#include <string_view>
#include <utility>

namespace ampt::models {

// Throws the UsageError that says `model` needs `what` unless `accepted`.
inline void require_data(bool accepted, const std::string& model, std::string_view what,
                         const data::DataSpec& spec) {
  if (accepted) return;
  throw UsageError(fmt::format(
      "model {} needs {}; the dataset gives {} samples of shape {{{}}}", model, what,
      spec.task == data::Task::language_model ? "language-model" : "classification",
      fmt::join(spec.sample_shape, ", ")));
}

// Throws the UsageError that names the first dimension option (set: non-zero) that contradicts
// the pretrained model's `config_json`.
inline void require_pretrained_dims(const config::Config& config, const std::string& config_json,
                                    int64_t n_layer, int64_t n_embd, int64_t n_head,
                                    int64_t vocab_size) {
  const auto contradicts = [&](const char* name, int64_t option, int64_t file_value) {
    if (option == 0 || option == file_value) return;
    throw UsageError(fmt::format("{} {} contradicts {} ({} {}): leave {} out with init_from", name,
                                 option, config_json, name, file_value, name));
  };
  contradicts("n_layer", config.n_layer, n_layer);
  contradicts("n_embd", config.n_embd, n_embd);
  contradicts("n_head", config.n_head, n_head);
  contradicts("vocab_size", config.vocab_size, vocab_size);
}

template <class Holder>
std::function<torch::Tensor(const torch::Tensor&)> forward_of(Holder holder) {
  return [holder](const torch::Tensor& x) mutable { return holder->forward(x); };
}

// A classifier's loss: cross_entropy of its [B, classes] logits.
template <class Holder>
std::function<torch::Tensor(const data::Batch&)> loss_of(Holder holder) {
  return [holder](const data::Batch& batch) mutable {
    return torch::nn::functional::cross_entropy(holder->forward(batch.inputs), batch.targets);
  };
}

// A language model's loss, packed examples included (data::Batch::positions).
template <class Holder>
std::function<torch::Tensor(const data::Batch&)> token_loss_of(Holder holder) {
  return [holder](const data::Batch& batch) mutable {
    return holder->loss(batch.inputs, batch.targets, batch.positions, batch.starts);
  };
}

// A classifier's Model from its holder: its forward, cross_entropy over its logits, the FLOPs of
// one sample and the architecture line.
template <class Holder>
Model classifier_model(Holder holder, int64_t flops_per_sample, std::string architecture) {
  Model model;
  model.module = holder.ptr();
  model.forward = forward_of(holder);
  model.loss = loss_of(holder);
  model.flops_per_sample = flops_per_sample;
  model.architecture = std::move(architecture);
  return model;
}

// A decoder's Model from its holder (GptImpl, LlamaImpl: the same members), its layers as its
// family's inventory lists them, and `tokens` per sample; the caller adds the FLOPs, the
// architecture line and set_fused, which differ by family.
template <class Holder>
Model decoder_model(Holder holder, LayerInventory layers, int64_t tokens) {
  Model model;
  model.module = holder.ptr();
  model.forward = forward_of(holder);
  model.loss = token_loss_of(holder);
  // A family with auxiliary losses (a sparse model's router losses) gives them apart too.
  if (auto names = holder->auxiliary_figure_names(); !names.empty()) {
    model.loss_terms = [holder](const data::Batch& batch) mutable {
      return holder->loss_terms(batch.inputs, batch.targets, batch.positions, batch.starts);
    };
    model.loss_figures = std::move(names);
  }
  model.logits = [holder](const data::Batch& batch) mutable {
    return holder->logits(batch.inputs, batch.positions, batch.starts, batch.logit_rows);
  };
  model.tokens_per_sample = tokens;
  model.layers = std::move(layers);
  model.set_fp8_head = [holder](bool fp8) mutable { holder->set_fp8_head(fp8); };
  model.next_logits = [holder](const torch::Tensor& tokens, KvCache& cache) mutable {
    return holder->next_logits(tokens, cache);
  };
  model.context = holder->context();
  model.set_block_hooks = [holder](BlockHooks* hooks) mutable { holder->set_block_hooks(hooks); };
  return model;
}

}  // namespace ampt::models

// What the families' files (<family>_family.cpp) share: the check that a model can take the
// data it is given, and a Model's forward and classifier loss from a module holder.
#pragma once

#include "ampt/core/errors.h"
#include "ampt/data/dataset.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/nn/functional/loss.h>

#include <functional>
#include <string>
#include <string_view>

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

template <class Holder>
std::function<torch::Tensor(const torch::Tensor&)> forward_of(Holder holder) {
  return [holder](const torch::Tensor& x) mutable { return holder->forward(x); };
}

// A classifier's loss: cross_entropy of its [B, classes] logits.
template <class Holder>
std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&)> loss_of(Holder holder) {
  return [holder](const torch::Tensor& x, const torch::Tensor& y) mutable {
    return torch::nn::functional::cross_entropy(holder->forward(x), y);
  };
}

}  // namespace ampt::models

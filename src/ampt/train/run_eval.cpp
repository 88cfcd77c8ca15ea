#include "ampt/train/run.h"

#include "ampt/data/document_examples.h"
#include "ampt/kernels/fused_classifier.h"

#include <torch/nn/functional/loss.h>

#include <cmath>

namespace ampt::train {

// The data pads targets with the value the loss skips.
static_assert(data::kIgnoredTarget == kernels::kIgnoreIndex);

torch::Tensor Run::loss_of(const data::Batch& batch, torch::Tensor* correct,
                           torch::Tensor* figures) {
  const auto& model = policy_.model();
  return policy_.compute([&] {
    if (correct == nullptr && figures != nullptr && model.loss_terms) {
      auto terms = model.loss_terms(batch);
      *figures = std::move(terms.figures);
      return terms.loss;
    }
    if (correct == nullptr) return model.loss(batch);
    // A language model's [B, T, vocab] logits are scored per token, a classifier's per sample.
    const auto logits = model.forward(batch.inputs).flatten(0, -2);
    const auto targets = batch.targets.flatten();
    *correct = (logits.argmax(-1) == targets).sum();
    return torch::nn::functional::cross_entropy(logits, targets);
  });
}

void Run::evaluate_figures(data::Loader& val, log::EvalReport& report) {
  auto& objective = step_->objective();
  const auto on_device = torch::TensorOptions().device(device_.device);
  auto loss_sum = torch::zeros({}, on_device.dtype(torch::kFloat64));
  auto units_sum = torch::zeros({}, on_device.dtype(torch::kInt64));
  torch::Tensor figures_sum;
  data::Batch first;
  for (int64_t b = 0; b < report.batches; ++b) {
    const auto batch = val.next();
    if (batch.targets.size(0) == 0) {
      // This rank's part of the last batch is empty. Where every rank takes part in each forward
      // (ZeRO-3), the first batch again keeps this one in step, uncounted.
      if (state_->forward_is_collective() && first.targets.defined()) objective.loss(first);
      continue;
    }
    if (!first.targets.defined()) first = batch;
    const auto units = objective.units(batch);
    const auto out = objective.loss(batch);
    loss_sum.add_(out.loss.to(torch::kFloat64) * units);
    units_sum.add_(units);
    const auto figures = out.figures.to(torch::kFloat64);
    figures_sum = figures_sum.defined() ? figures_sum.add_(figures) : figures.clone();
  }
  policy_.release_gathered();
  // Means over the ranks: their ratios are those of the sums over all ranks' batches.
  const double units = dist_.mean(units_sum.to(torch::kFloat64)).item<double>();
  report.loss = dist_.mean(loss_sum).item<double>() / units;
  const auto& names = objective.figure_names();
  if (!figures_sum.defined()) {
    figures_sum = torch::zeros({static_cast<int64_t>(names.size())}, on_device.dtype(torch::kFloat64));
  }
  const auto figures = (dist_.mean(figures_sum) / units).cpu();
  for (std::size_t i = 0; i < names.size(); ++i) {
    report.figures.emplace_back(names[i], figures[static_cast<int64_t>(i)].item<double>());
  }
}

log::EvalReport Run::evaluate(int64_t step) {
  log::EvalReport report;
  report.step = step;
  report.epoch = progress_.batches->state().epoch;
  if (!splits_.val) return report;
  data::Loader val(splits_.val,
                   data::val_loader_options(
                       progress_.loading, config_.dataset, splits_.val->size(),
                       config_.eval_batch_size > 0 ? config_.eval_batch_size
                                                   : progress_.loading.batch_size));
  report.batches = config_.eval_batches > 0
                       ? std::min(config_.eval_batches, val.batches_per_epoch())
                       : val.batches_per_epoch();
  torch::NoGradGuard no_grad;
  dist_.share_buffers(policy_.model().module->buffers());
  policy_.model().module->eval();
  if (!step_->objective().figure_names().empty()) {
    evaluate_figures(val, report);
    policy_.model().module->train();
    observer_.on_eval(report);
    return report;
  }
  const auto on_device = torch::TensorOptions().device(device_.device);
  auto loss_sum = torch::zeros({}, on_device.dtype(torch::kFloat64));
  auto correct_sum = torch::zeros({}, on_device.dtype(torch::kInt64));
  auto counted_sum = torch::zeros({}, on_device.dtype(torch::kInt64));
  const bool language_model = splits_.spec.task == data::Task::language_model;
  for (int64_t b = 0; b < report.batches; ++b) {
    const auto batch = val.next();
    if (batch.targets.size(0) == 0) {
      // This rank's part of the last batch is empty. Where every rank takes part in each
      // forward (ZeRO-3), a forward of one sample keeps this one in step, unscored.
      if (state_->forward_is_collective()) {
        auto shape = batch.inputs.sizes().vec();
        shape[0] = 1;
        auto target_shape = batch.targets.sizes().vec();
        target_shape[0] = 1;
        loss_of({torch::zeros(shape, batch.inputs.options()),
                 torch::zeros(target_shape, batch.targets.options())},
                nullptr);
      }
      continue;
    }
    // Language models report perplexity only: their loss needs no logits (the fused head).
    torch::Tensor correct;
    const auto loss = loss_of(batch, language_model ? nullptr : &correct);
    // A batch's loss is the mean over its scored targets, whose number varies (padding, a small
    // split's one short batch): weighted by that number, the sums give the mean per target.
    const auto counted = batch.targets.ne(kernels::kIgnoreIndex).sum();
    loss_sum.add_(loss.to(torch::kFloat64) * counted);
    counted_sum.add_(counted);
    if (!language_model) correct_sum.add_(correct);
  }
  policy_.model().module->train();
  policy_.release_gathered();
  // Means over the ranks: their ratio is that of the sums over all ranks' batches.
  const double counted = dist_.mean(counted_sum.to(torch::kFloat64)).item<double>();
  report.loss = dist_.mean(loss_sum).item<double>() / counted;
  if (language_model) {
    report.perplexity = std::exp(report.loss);
  } else {
    report.accuracy = dist_.mean(correct_sum).item<double>() / counted;
  }
  observer_.on_eval(report);
  return report;
}

}  // namespace ampt::train

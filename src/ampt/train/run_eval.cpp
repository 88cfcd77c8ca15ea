#include "ampt/train/run.h"

#include "ampt/precision/autocast_guard.h"

#include <torch/nn/functional/loss.h>

#include <cmath>

namespace ampt::train {

torch::Tensor Run::loss_of(const data::Batch& batch, torch::Tensor* correct) {
  precision::AutocastGuard autocast(device_.device.type(), policy_.compute_dtype, policy_.autocast,
                                    config_.autocast_cache);
  precision::IslandScope islands(&islands_);
  if (correct == nullptr) return model_.loss(batch.inputs, batch.targets);
  // A language model's [B, T, vocab] logits are scored per token, a classifier's per sample.
  const auto logits = model_.forward(batch.inputs).flatten(0, -2);
  const auto targets = batch.targets.flatten();
  *correct = (logits.argmax(-1) == targets).sum();
  return torch::nn::functional::cross_entropy(logits, targets);
}

log::EvalReport Run::evaluate(int64_t step) {
  log::EvalReport report;
  report.step = step;
  report.epoch = batches_->state().epoch;
  if (!splits_.val) return report;
  data::Loader val(splits_.val,
                   data::val_loader_options(config_, device_.device, splits_.val->size()));
  report.batches = config_.eval_batches > 0
                       ? std::min(config_.eval_batches, val.batches_per_epoch())
                       : val.batches_per_epoch();
  torch::NoGradGuard no_grad;
  dist_.share_buffers(model_.module->buffers());
  model_.module->eval();
  auto loss_sum = torch::zeros({}, torch::dtype(torch::kFloat64).device(device_.device));
  auto correct_sum = torch::zeros({}, torch::dtype(torch::kInt64).device(device_.device));
  int64_t targets = 0;
  const bool language_model = splits_.spec.task == data::Task::language_model;
  for (int64_t b = 0; b < report.batches; ++b) {
    const auto batch = val.next();
    // Language models report perplexity only: their loss needs no logits (the fused head).
    torch::Tensor correct;
    loss_sum.add_(loss_of(batch, language_model ? nullptr : &correct));
    if (!language_model) correct_sum.add_(correct);
    targets += batch.targets.numel();
  }
  model_.module->train();
  // Every batch has batch_size samples (the loader drops a short last one) and every rank as
  // many batches: plain means, over batches and then over ranks.
  report.loss = dist_.mean(loss_sum).item<double>() / static_cast<double>(report.batches);
  if (language_model) {
    report.perplexity = std::exp(report.loss);
  } else {
    report.accuracy = dist_.mean(correct_sum).item<double>() / static_cast<double>(targets);
  }
  observer_.on_eval(report);
  return report;
}

}  // namespace ampt::train

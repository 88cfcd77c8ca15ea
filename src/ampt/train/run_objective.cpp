#include "ampt/train/run.h"

#include "ampt/config/enum_names.h"
#include "ampt/core/errors.h"
#include "ampt/data/token_cache.h"
#include "ampt/models/lora.h"
#include "ampt/train/pretrained.h"
#include "ampt/train/reference_cache.h"

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <torch/nn/modules/linear.h>

#include <algorithm>

namespace ampt::train {

Run::ReferenceStart Run::reference_start() {
  ReferenceStart start;
  if (!uses_reference()) return start;
  torch::NoGradGuard no_grad;
  if (config_.precompute_ref_logps) {
    start.logps = reference_log_probs(start.logps_note);
    return start;
  }
  if (config_.lora_rank > 0) {
    if (config_.init_adapter.empty()) return start;
    for (const auto& item : policy_.model().module->named_parameters()) {
      if (models::is_lora_parameter(item.key())) {
        start.adapters.emplace_back(item.key(), item.value().detach().clone());
      }
    }
    return start;
  }
  // Building the copy draws its random init: the run's own draws must not depend on it.
  auto cpu = at::detail::getDefaultCPUGenerator();
  const auto cpu_state = cpu.get_state();
  auto copy = std::make_shared<models::Model>(make_model_to_load(config_, splits_.spec, device_.device));
  cpu.set_state(cpu_state);
  copy->module->eval();
  // Each tensor as the model holds it now, in its dtype (O2's half weights included).
  const auto parameters = policy_.model().module->named_parameters();
  for (auto& item : copy->module->named_parameters()) {
    item.value().set_data(parameters[item.key()].detach().clone());
    item.value().set_requires_grad(false);
  }
  const auto buffers = policy_.model().module->named_buffers();
  for (auto& item : copy->module->named_buffers()) {
    item.value().set_data(buffers[item.key()].detach().clone());
  }
  hold_frozen(*copy);
  start.model = std::move(copy);
  return start;
}

std::string Run::hold_frozen(models::Model& model) {
  model.module->eval();
  for (auto& parameter : model.module->parameters()) parameter.set_requires_grad(false);
  // Autocast computes every Linear in its half dtype: holding their weights in it gives the same
  // values at half the memory. Norms and embeddings keep the dtype the model gives them.
  const auto& policy = policy_.precision().policy();
  const bool cast =
      policy.autocast && policy.compute_dtype != torch::kFloat && policy_.precision().stages().size() <= 1;
  std::string held;
  for (const auto& module : model.module->modules()) {
    if (auto* linear = dynamic_cast<torch::nn::LinearImpl*>(module.get())) {
      if (cast) linear->weight.set_data(linear->weight.to(policy.compute_dtype));
      held = c10::toString(linear->weight.scalar_type());
    }
  }
  return held;
}

torch::Tensor Run::reference_log_probs(std::string& note) {
  const auto& policy = policy_.precision().policy();
  const auto cached = reference_cache_path(
      data::token_cache_dir(config_), reference_data_, reference_weights_,
      fmt::format("{} {} autocast {} fused_kernels {}", c10::DeviceTypeName(device_.device.type()),
                  policy.name(), policy.autocast, static_cast<int>(config_.fused_kernels)));
  auto table = read_reference_table(cached);
  // Every rank looks before any computes, and all make the pass unless all found the table: a
  // rank whose cache lacks it (another node's disk, or rank 0's table written after the others
  // looked) would otherwise run collective forwards (ZeRO-3, expert parallelism) alone.
  auto missing = torch::full({}, table.defined() ? 0 : 1,
                             torch::dtype(torch::kInt64).device(device_.device));
  dist_.sum(missing, "the agreement on the reference log-probabilities' cache");
  if (missing.item<int64_t>() == 0) {
    note = fmt::format("the model as training starts, its log-probabilities of the pairs read from "
                       "{}, which an earlier run of the same data and weights computed (no "
                       "reference model while training)",
                       cached);
    return table.to(device_.device);
  }
  const auto started = Clock::now();
  std::vector<torch::Tensor> ids;
  std::vector<torch::Tensor> values;
  policy_.model().module->eval();
  for (const auto& split : {splits_.train, splits_.val}) {
    if (!split) continue;
    data::LoaderOptions options;
    options.batch_size = std::min(config_.batch_size, split->size());
    options.shuffle = false;
    options.keep_last = true;
    options.workers = 0;
    options.device = device_.device;
    options.name = config_.dataset;
    data::Loader pass(split, options);
    for (int64_t b = 0; b < pass.batches_per_epoch(); ++b) {
      const auto batch = pass.next();
      ids.push_back(batch.pair_ids);
      values.push_back(pair_log_probs(policy_.logits(batch), batch));
    }
  }
  policy_.model().module->train();
  policy_.release_gathered();  // ZeRO-3: the root, held through the pass
  const auto id = torch::cat(ids);
  table = torch::zeros({id.max().item<int64_t>() + 1, 2},
                            torch::dtype(torch::kFloat32).device(device_.device));
  table.index_copy_(0, id, torch::cat(values));
  note = fmt::format("the model as training starts, its log-probabilities of the {} pairs "
                     "precomputed in {:.1f} s and kept in {} (no reference model while training)",
                     id.numel(), seconds_since(started), cached);
  if (dist_.rank() == 0) write_reference_table(cached, table);
  return table;
}

bool Run::uses_reference() const {
  if (grpo()) return config_.beta > 0;
  return splits_.spec.preference && needs_reference(config_.objective);
}

std::pair<std::function<torch::Tensor(const data::Batch&)>, std::string> Run::reference_forward(
    const ReferenceStart& reference) {
  if (reference.model) {
    return {[this, copy = reference.model](const data::Batch& batch) {
              return policy_.compute([&] { return copy->logits(batch); });
            },
            "a frozen copy of the model as training starts"};
  }
  if (!reference.adapters.empty()) {
    return {[this, adapters = reference.adapters](const data::Batch& batch) {
              const models::AdaptersReplaced initial(*policy_.model().module, adapters);
              return policy_.logits(batch);
            },
            fmt::format("the base with {}'s adapters as they started (no second model)", config_.init_adapter)};
  }
  return {[this](const data::Batch& batch) {
            const models::AdaptersOff base;
            return policy_.logits(batch);
          },
          "the base with the LoRA adapters off (no second model)"};
}

std::shared_ptr<Objective> Run::make_objective(const ReferenceStart& reference) {
  if (config_.zero_stage == 3 && reference.model) {
    throw UsageError(fmt::format(
        "--objective {} under zero_stage 3 would hold its reference, a copy of the model, whole on "
        "every rank: {}train LoRA adapters (the reference is their base)",
        config::to_string(config_.objective),
        grpo() ? "set --beta 0 (no reference), or " : "add --precompute_ref_logps (no reference model while training), or "));
  }
  if (grpo()) return make_grpo_objective(reference);
  if (config_.objective == config::Objective::distill) return make_distill_objective();
  if (!splits_.spec.preference) {
    return token_cross_entropy(
        [this](const data::Batch& batch, torch::Tensor* figures) {
          const kernels::TargetCheckScope deferred(&target_check_);
          return loss_of(batch, nullptr, figures);
        },
        splits_.spec.every_target_scored, policy_.model().loss_figures);
  }
  PreferenceModels models;
  models.policy = [this](const data::Batch& batch) { return policy_.logits(batch); };
  if (needs_reference(config_.objective)) {
    if (reference.logps.defined()) {
      models.reference_table = reference.logps;
      models.reference_description = reference.logps_note;
    } else {
      std::tie(models.reference, models.reference_description) = reference_forward(reference);
    }
  }
  return preference_objective(config_, std::move(models));
}

}  // namespace ampt::train

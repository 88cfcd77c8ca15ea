#include "ampt/commands/run_model.h"

#include "ampt/config/describe.h"
#include "ampt/config/resolve.h"
#include "ampt/models/catalog.h"
#include "ampt/models/quantizable.h"
#include "ampt/precision/master_weights.h"
#include "ampt/precision/precision_islands.h"
#include "ampt/precision/precision_state.h"
#include "ampt/train/base_fingerprint.h"
#include "ampt/train/pretrained.h"

namespace ampt::commands {

config::Config run_config(const std::optional<checkpoint::Checkpoint>& saved,
                          const std::vector<std::string>& flags, const Environment& env) {
  std::vector<std::string> all;
  if (saved) all = config::described_flags(saved->config);
  all.insert(all.end(), flags.begin(), flags.end());
  return config::resolve(all, env, models::catalog()).config();
}

models::Model load_run_model(const config::Config& config,
                             const std::optional<checkpoint::Checkpoint>& saved,
                             const std::string& checkpoint_path, const torch::Device& device) {
  const auto request = models::sample_request(config);
  // Over a quantized base the model is rebuilt as it trained: the base held and quantized in the
  // dtype the run held it in, so that the adapters see the weights they learnt on (otherwise in
  // fp32: a CPU would emulate half matmuls).
  const bool lora = config.lora_rank > 0;
  const bool deferred = train::base_loads_deferred(config);
  const bool quantized = lora && config.base_dtype != config::BaseDtype::auto_select;
  auto model = train::make_model_to_load(
      config, {data::Task::language_model, {request.block_size}, request.vocab_size}, device);
  NamedTensors tensors, base, trained;
  for (const auto& item : model.module->named_parameters()) {
    tensors.emplace_back(item.key(), item.value());
    (item.value().requires_grad() ? trained : base).emplace_back(item.key(), item.value());
  }
  for (const auto& item : model.module->named_buffers()) {
    tensors.emplace_back(item.key(), item.value());
    trained.emplace_back(item.key(), item.value());
  }
  if (saved && !lora) {
    checkpoint::copy_into(saved->model, tensors, "model", checkpoint_path);
    model.module->eval();
    return model;
  }
  // A LoRA checkpoint holds the adapters only: the base comes from where its run took it.
  // As training holds it (MasterWeights::store_frozen): the half dtype, but for fp32 islands.
  const auto options = precision::precision_options(config);
  const auto held_in = precision::frozen_dtype(precision::stage_policies(options, device));
  const auto islands = precision::select_islands(*model.module, options.keep_fp32_modules,
                                                 options.opt_level == config::OptLevel::O2);
  precision::MasterWeights frozen(*model.module, /*enabled=*/false,
                                  [&](const std::string& name) {
                                    return islands.owns_parameter(name);
                                  });
  const auto hold = [&] { frozen.store_frozen(held_in); };
  if (quantized && deferred) hold();  // placeholders: each tensor then loads into that dtype
  const auto loaded = train::load_pretrained(config, tensors, *model.module);
  // Before a random base is quantized: its values are gone after.
  const auto fingerprint = saved ? train::base_fingerprint(base, loaded.digests) : "";
  if (quantized && !deferred) {
    hold();
    models::quantize_base(*model.module, config.base_dtype);
  }
  if (saved) {
    train::require_same_base(checkpoint_path, *saved, config.init_from, fingerprint,
                             config.base_dtype);
    checkpoint::copy_into(saved->model, trained, "model", checkpoint_path);
  }
  model.module->eval();
  return model;
}

std::unique_ptr<train::Policy> load_run_policy(const config::Config& config,
                                               const std::optional<checkpoint::Checkpoint>& saved,
                                               const std::string& checkpoint_path,
                                               const torch::Device& device) {
  auto policy = std::make_unique<train::Policy>(
      config, load_run_model(config, saved, checkpoint_path, device), device);
  auto& precision = policy->precision();
  if (saved) {
    if (const auto stage = precision.stage_at(saved->step, saved->data_epoch);
        stage != precision.stage()) {
      precision.enter_stage(stage);
    }
  }
  // As freeze_base holds it: the frozen dtype of the run's stages, its fp32 islands apart (a
  // quantized base load_run_model has held so already).
  if (config.lora_rank > 0 && config.base_dtype == config::BaseDtype::auto_select) {
    precision.store_frozen();
  }
  // Nothing steps: O2's fp32 masters beside its half weights are not needed.
  precision.masters().release_masters();
  return policy;
}

}  // namespace ampt::commands

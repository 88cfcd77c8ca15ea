#include "ampt/commands/run_model.h"

#include "ampt/config/describe.h"
#include "ampt/config/resolve.h"
#include "ampt/models/catalog.h"
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
  torch::manual_seed(config.seed);
  auto model = models::make_model(
      config, {data::Task::language_model, {request.block_size}, request.vocab_size});
  model.module->to(device);
  NamedTensors tensors, base, trained;
  for (const auto& item : model.module->named_parameters()) {
    tensors.emplace_back(item.key(), item.value());
    (item.value().requires_grad() ? trained : base).emplace_back(item.key(), item.value());
  }
  for (const auto& item : model.module->named_buffers()) {
    tensors.emplace_back(item.key(), item.value());
    trained.emplace_back(item.key(), item.value());
  }
  if (saved && config.lora_rank == 0) {
    checkpoint::copy_into(saved->model, tensors, "model", checkpoint_path);
  } else {
    // A LoRA checkpoint holds the adapters only: the base comes from where its run took it.
    train::load_pretrained(config, tensors);
    if (saved) {
      train::require_same_base(checkpoint_path, *saved, config.init_from,
                               train::base_fingerprint(base));
      checkpoint::copy_into(saved->model, trained, "model", checkpoint_path);
    }
  }
  model.module->eval();
  return model;
}

}  // namespace ampt::commands

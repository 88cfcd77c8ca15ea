#include "ampt/train/policy.h"

namespace ampt::train {
namespace {

std::vector<torch::Tensor> trained_parameters(const torch::nn::Module& module) {
  std::vector<torch::Tensor> out;
  for (const auto& p : module.parameters()) {
    if (p.requires_grad()) out.push_back(p);
  }
  return out;
}

}  // namespace

Policy::Policy(const config::Config& config, models::Model model, const c10::Device& device)
    : model_(std::move(model)),
      parameters_(trained_parameters(*model_.module)),
      precision_(precision::precision_options(config), *model_.module, device),
      device_(device),
      autocast_cache_(config.autocast_cache),
      fused_(config.fused_kernels != config::AutoSwitch::off) {}

void Policy::set_fused(bool fused) {
  fused_ = fused;
  if (model_.set_fused) model_.set_fused(fused);
}

void Policy::release_gathered() {
  if (sharded_ != nullptr) sharded_->release_all();
}

Policy::Context::Context(Policy& policy)
    : autocast_(policy.device_.type(), policy.precision_.policy().compute_dtype,
                policy.precision_.policy().autocast, policy.autocast_cache_),
      islands_(&policy.precision_.islands()) {
  if (policy.sharded_ != nullptr) policy.sharded_->gather(policy.sharded_->root());
}

torch::Tensor Policy::logits(const data::Batch& batch) {
  return compute([&] { return model_.logits(batch); });
}

torch::Tensor Policy::next_logits(const torch::Tensor& tokens, models::KvCache& cache) {
  return compute([&] { return model_.next_logits(tokens, cache); });
}

}  // namespace ampt::train

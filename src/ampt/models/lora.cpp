#include "ampt/models/lora.h"

#include "ampt/config/enum_names.h"

#include "ampt/config/precision_schedule.h"
#include "ampt/core/errors.h"
#include "ampt/hf/peft_adapter.h"
#include "ampt/kernels/fused_linear.h"
#include "ampt/models/linear.h"

#include <torch/nn/functional/dropout.h>
#include <torch/nn/init.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace ampt::models {
namespace {

constexpr const char* kDown = "lora_A";
constexpr const char* kUp = "lora_B";

}  // namespace

bool lora_target_matches(const std::string& module, const std::string& target) {
  return hf::peft_target_matches(module, target);
}

bool lora_target_matches_any(const std::string& module, const std::vector<std::string>& targets) {
  return std::ranges::any_of(
      targets, [&](const std::string& target) { return lora_target_matches(module, target); });
}

LoraFactorImpl::LoraFactorImpl(int64_t out_features, int64_t in_features) {
  weight = register_parameter("weight", torch::zeros({out_features, in_features}));
}

namespace {
thread_local bool adapters_off = false;
thread_local const std::unordered_map<const LoraFactorImpl*, torch::Tensor>* replaced = nullptr;

const torch::Tensor& factor_weight(const LoraFactorImpl& factor) {
  return replaced == nullptr ? factor.weight : replaced->at(&factor);
}

}  // namespace

AdaptersOff::AdaptersOff() : was_off_(adapters_off) { adapters_off = true; }
AdaptersOff::~AdaptersOff() { adapters_off = was_off_; }

AdaptersReplaced::AdaptersReplaced(const torch::nn::Module& root, const NamedTensors& weights)
    : previous_(replaced) {
  std::unordered_map<std::string, torch::Tensor> by_name(weights.begin(), weights.end());
  for (const auto& item : root.named_modules("", /*include_self=*/false)) {
    if (const auto* factor = dynamic_cast<const LoraFactorImpl*>(item.value().get())) {
      weights_.emplace(factor, by_name.at(item.key() + ".weight"));
    }
  }
  replaced = &weights_;
}

AdaptersReplaced::~AdaptersReplaced() { replaced = previous_; }

namespace {

// The factors among `holder`'s children.
LoraAdapter factors_of(const torch::nn::Module& holder) {
  LoraAdapter adapter;
  for (const auto& item : holder.named_children()) {
    auto* factor = dynamic_cast<LoraFactorImpl*>(item.value().get());
    if (factor == nullptr) continue;
    if (item.key() == kDown) adapter.down = factor;
    if (item.key() == kUp) adapter.up = factor;
  }
  if (adapter.up == nullptr) return {};
  return adapter;
}

}  // namespace

LoraAdapter lora_adapter(const torch::nn::LinearImpl& linear) {
  // Most Linears have no children: the common case costs one empty check per forward.
  if (linear.children().empty() || adapters_off) return {};
  return factors_of(linear);
}

LoraAdapter expert_lora_adapter(const torch::nn::Module& owner, const std::string& weight) {
  if (adapters_off) return {};
  for (const auto& item : owner.named_children()) {
    if (item.key() == weight) return factors_of(*item.value());
  }
  return {};
}

LoraAdapter expert_lora_adapter(const QuantizableWeight& weight) {
  if (weight.parameter().dim() != 3) return {};
  const auto* owner = dynamic_cast<const torch::nn::Module*>(weight.owner);
  return expert_lora_adapter(*owner, weight.owner->quantizable_names()[weight.index]);
}

torch::Tensor expert_lora_delta(const LoraAdapter& adapter, int64_t experts) {
  const auto& a = factor_weight(*adapter.down);  // [r·E, in]
  const auto& b = factor_weight(*adapter.up);    // [out, r·E], columns (r, e), e fastest
  const auto down = a.view({experts, -1, a.size(1)});
  const auto up = b.view({b.size(0), -1, experts}).permute({2, 0, 1});
  return at::bmm(up, down) * adapter.up->scaling;
}

torch::Tensor lora_update(const LoraAdapter& adapter, const torch::Tensor& x, bool training) {
  namespace F = torch::nn::functional;
  const auto in = adapter.up->dropout > 0.0
                      ? F::dropout(x, F::DropoutFuncOptions().p(adapter.up->dropout).training(training))
                      : x;
  return kernels::linear(kernels::linear(in, factor_weight(*adapter.down), {}),
                        factor_weight(*adapter.up), {}) *
         adapter.up->scaling;
}

namespace {

// The pair of factors, A [down_rows, in] from kaiming_uniform(a = sqrt(5)) and B [out, up_cols]
// zero, registered on `holder` on w's device.
void add_factors(torch::nn::Module& holder, int64_t down_rows, int64_t in, int64_t out,
                 int64_t up_cols, const torch::Device& device, const LoraOptions& options) {
  auto down = LoraFactor(down_rows, in);
  auto up = LoraFactor(out, up_cols);
  {
    // On the host, then moved: the same seed gives the same adapters on every device.
    torch::NoGradGuard no_grad;
    torch::nn::init::kaiming_uniform_(down->weight, std::sqrt(5.0));
  }
  down->to(device);
  up->to(device);
  up->scaling = options.alpha / static_cast<double>(options.rank);
  up->dropout = options.dropout;
  holder.register_module(kDown, down);
  holder.register_module(kUp, up);
}

}  // namespace

void require_no_expert_dropout(double dropout, const std::string& expert_weight) {
  if (dropout == 0.0) return;
  throw UsageError(fmt::format(
      "lora_dropout {} with lora_targets naming the expert weight {}: an expert group's adapter "
      "is added to its weights, where no input dropout can go (peft refuses it too); use "
      "lora_dropout 0 or leave the experts out",
      dropout, expert_weight));
}

void attach_lora(torch::nn::Module& root, const LoraOptions& options) {
  for (auto& p : root.parameters()) p.set_requires_grad(false);
  std::vector<std::string> linears, expert_weights;
  // Expert groups first: the holders they gain are modules the walk below must not meet.
  for (const auto& item : root.named_modules("", /*include_self=*/false)) {
    auto* group = dynamic_cast<QuantizableWeights*>(item.value().get());
    if (group == nullptr) continue;
    for (size_t i = 0; i < group->quantizable_names().size(); ++i) {
      const auto& w = group->quantizable_parameter(i);
      if (w.dim() != 3) continue;
      const auto name = item.key() + "." + group->quantizable_names()[i];
      expert_weights.push_back(name);
      if (!lora_target_matches_any(name, options.targets) &&
          !lora_target_matches_any(name, options.parameters)) {
        continue;
      }
      require_no_expert_dropout(options.dropout, name);
      const int64_t experts = w.size(0), r = options.rank;
      auto holder = std::make_shared<torch::nn::Module>();
      add_factors(*holder, r * experts, w.size(2), w.size(1), r * experts, w.device(), options);
      item.value()->register_module(group->quantizable_names()[i], holder);
    }
  }
  for (const auto& item : root.named_modules("", /*include_self=*/false)) {
    auto* linear = dynamic_cast<torch::nn::LinearImpl*>(item.value().get());
    if (linear == nullptr) continue;
    linears.push_back(item.key());
    if (!lora_target_matches_any(item.key(), options.targets)) continue;
    if (item.key() == "lm_head") {
      // The head feeds the fused loss as a weight, never through a Linear layer: an adapter there
      // would train and change nothing.
      throw UsageError("lora_targets names the output head lm_head, which the fused loss reads as "
                       "a weight: adapters go on the blocks' Linear layers");
    }
    const auto& w = linear->weight;
    add_factors(*linear, options.rank, w.size(1), w.size(0), options.rank, w.device(), options);
  }
  require_parameters_match(options.parameters, expert_weights);
  linears.insert(linears.end(), expert_weights.begin(), expert_weights.end());
  require_targets_match(options.targets, linears);
}

LoraOptions lora_options(const config::Config& config,
                         const std::vector<std::string>& family_defaults) {
  return {config.lora_rank, config.lora_alpha, config.lora_dropout,
          lora_targets_of(config, family_defaults),
          split_lora_targets(config.lora_target_parameters)};
}

NamedTensors merged_lora_weights(const torch::nn::Module& root) {
  torch::NoGradGuard no_grad;
  // A quantized base's weights (a Linear's, an expert group's) are their dequantized storage,
  // rounded once to the dtype the base is held in, with the adapter's update where there is one.
  std::map<std::string, torch::Tensor> merged;
  std::map<std::string, c10::ScalarType> dtypes;
  for (const auto& weight : quantizable_weights(root)) {
    if (weight.quantized()) {
      merged[weight.name] = weight.quantized()->dequantize(torch::kFloat);
      dtypes[weight.name] = weight.parameter().scalar_type();
    }
    const auto adapter = expert_lora_adapter(weight);
    if (!adapter) continue;
    const auto& w = weight.parameter();
    auto& m = merged[weight.name];
    if (!m.defined()) m = w.to(torch::kFloat);
    m = m + expert_lora_delta(adapter, w.size(0)).to(torch::kFloat);
    dtypes[weight.name] = w.scalar_type();
  }
  for (const auto& item : root.named_modules("", /*include_self=*/false)) {
    const auto* linear = dynamic_cast<const torch::nn::LinearImpl*>(item.value().get());
    if (linear == nullptr) continue;
    const auto adapter = lora_adapter(*linear);
    if (!adapter) continue;
    const auto name = item.key() + ".weight";
    auto& w = merged[name];
    if (!w.defined()) w = linear->weight.to(torch::kFloat);
    w = w + adapter.up->weight.to(torch::kFloat).mm(adapter.down->weight.to(torch::kFloat)) *
                adapter.up->scaling;
    dtypes[name] = linear->weight.scalar_type();
  }
  for (auto& [name, w] : merged) w = w.to(dtypes.at(name));
  NamedTensors out;
  for (const auto& item : root.named_parameters()) {
    if (is_lora_parameter(item.key())) continue;
    const auto it = merged.find(item.key());
    out.emplace_back(item.key(), it == merged.end() ? item.value().detach() : it->second);
  }
  return out;
}

bool is_lora_parameter(const std::string& name) {
  return name.ends_with(std::string(".") + kDown + ".weight") ||
         name.ends_with(std::string(".") + kUp + ".weight");
}

void require_base_dtype(const config::Config& config) {
  if (config.base_dtype == config::BaseDtype::auto_select) return;
  if (config.lora_rank == 0) {
    throw UsageError(fmt::format(
        "base_dtype {} stores a LoRA run's frozen base, and lora_rank is 0 (every parameter "
        "trains): set --lora_rank R, or base_dtype auto for a full fine-tune",
        config::to_string(config.base_dtype)));
  }
  if (config.mixed_precision == config::MixedPrecision::fp8) {
    throw UsageError(fmt::format(
        "base_dtype {} dequantizes the base's Linear weights to the compute dtype, and "
        "mixed_precision fp8 would run them in e4m3: use mixed_precision bf16 with it, or "
        "base_dtype auto",
        config::to_string(config.base_dtype)));
  }
}

std::vector<std::string> lora_targets_of(const config::Config& config,
                                         const std::vector<std::string>& family_defaults) {
  if (family_defaults.empty()) {
    throw UsageError(fmt::format("lora_rank {} with model '{}': LoRA adapts the Linear layers of "
                                 "a transformer (gpt, llama, qwen2, qwen3, mistral and their presets); use "
                                 "lora_rank 0",
                                 config.lora_rank, config.model));
  }
  auto targets = split_lora_targets(config.lora_targets);
  return targets.empty() ? family_defaults : targets;
}

void require_targets_match(const std::vector<std::string>& targets,
                           const std::vector<std::string>& linears) {
  for (const auto& target : targets) {
    if (std::ranges::any_of(linears, [&](const std::string& name) {
          return lora_target_matches(name, target);
        })) {
      continue;
    }
    const std::vector<std::string> some(linears.begin(),
                                        linears.begin() + std::min<size_t>(linears.size(), 8));
    throw UsageError(fmt::format(
        "lora_targets '{}' matches no Linear layer of the model (a name, or the end of one after "
        "a '.'); its Linear layers include {}",
        target, fmt::join(some, ", ")));
  }
}

void require_parameters_match(const std::vector<std::string>& parameters,
                              const std::vector<std::string>& expert_weights) {
  for (const auto& target : parameters) {
    if (std::ranges::any_of(expert_weights,
                            [&](const auto& name) { return lora_target_matches(name, target); })) {
      continue;
    }
    throw UsageError(fmt::format(
        "lora_target_parameters '{}' matches no expert group weight of the model (a name, or the "
        "end of one after a '.'){}",
        target,
        expert_weights.empty()
            ? std::string(": it has no experts")
            : fmt::format("; its expert weights include {}",
                          fmt::join(std::vector(expert_weights.begin(),
                                                expert_weights.begin() +
                                                    std::min<size_t>(expert_weights.size(), 4)),
                                    ", "))));
  }
}

std::vector<std::string> split_lora_targets(const std::string& text) {
  auto targets = config::split_module_patterns(text);
  std::erase(targets, std::string());
  return targets;
}

}  // namespace ampt::models

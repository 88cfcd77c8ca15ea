// LoRA adapters (Hu et al., 2021, as peft's LoraLayer): beside a frozen Linear y = W x + b, a
// trained low-rank update, y = W x + b + (alpha / r) · B A dropout(x), with A [r, in] and B
// [out, r]. Attached from outside the model: the adapter's factors become children `lora_A` and
// `lora_B` of the Linear they adapt, so their names are peft's without its adapter name
// ("h.0.attn.c_attn.lora_A.weight"), and the Linear seam (linear.h), through which every block
// Linear of a transformer runs, adds the update.
//
// An expert group's 3-D weight [E, out, in] (moe.h) takes one adapter for all its experts, as
// peft's ParamWrapper (target_parameters) does: A [r·E, in] and B [out, r·E], expert e's update
// (alpha / r) · B_e A_e with A_e = A.view(E, r, in)[e] and B_e = B.view(out, r, E)[:, :, e],
// added to its weight before the GEMMs (no dropout: peft refuses it there too). Its factors are
// children of a module named as the weight ("layers.1.mlp.experts.gate_up_proj.lora_A.weight");
// hf/peft_adapter.h writes and reads them under peft's names.
#pragma once

#include "ampt/config/config.h"
#include "ampt/core/named_tensors.h"
#include "ampt/models/quantizable.h"

#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace ampt::models {

// peft's target_modules rule: `module` is `target`, or ends in "." + target.
bool lora_target_matches(const std::string& module, const std::string& target);
// Whether any of `targets` matches `module` by that rule.
bool lora_target_matches_any(const std::string& module, const std::vector<std::string>& targets);

struct LoraOptions {
  int64_t rank = 0;  // 0: no adapters
  double alpha = 16.0;
  double dropout = 0.0;
  // Module names matched as peft's target_modules: a name equal to one, or ending in "." + one;
  // they match an expert group's weights' names ("layers.1.mlp.experts.down_proj") too.
  std::vector<std::string> targets;
  // Expert group weights' names matched the same way, as peft's target_parameters (and only
  // those: "down_proj" here leaves a dense MLP's down_proj alone).
  std::vector<std::string> parameters;
};

// One factor of an adapter: a bias-free matrix `weight`, as peft's nn.Linear lora_A and lora_B.
// The up factor (B) carries the adapter's scaling and input dropout.
class LoraFactorImpl : public torch::nn::Module {
 public:
  LoraFactorImpl(int64_t out_features, int64_t in_features);
  torch::Tensor weight;
  double scaling = 1.0;
  double dropout = 0.0;
};
TORCH_MODULE(LoraFactor);

// The adapter on `linear`, both factors, or none.
struct LoraAdapter {
  LoraFactorImpl* down = nullptr;  // A
  LoraFactorImpl* up = nullptr;    // B
  explicit operator bool() const { return down != nullptr; }
};
LoraAdapter lora_adapter(const torch::nn::LinearImpl& linear);

// While one lives on this thread, every Linear runs as its frozen base, as if it had no adapter
// (peft's disable_adapter): a preference objective's reference model under LoRA, with no copy.
class AdaptersOff {
 public:
  AdaptersOff();
  ~AdaptersOff();
  AdaptersOff(const AdaptersOff&) = delete;
  AdaptersOff& operator=(const AdaptersOff&) = delete;

 private:
  bool was_off_;
};

// While one lives on this thread, the adapters of `root` compute with `weights` (named as root's
// parameters, "....lora_A.weight") instead of their own: the adapters as a run continuing a peft
// adapter started, its preference reference (TRL's), without a second model. Throws
// std::out_of_range for an adapter `weights` lacks.
class AdaptersReplaced {
 public:
  AdaptersReplaced(const torch::nn::Module& root, const NamedTensors& weights);
  ~AdaptersReplaced();
  AdaptersReplaced(const AdaptersReplaced&) = delete;
  AdaptersReplaced& operator=(const AdaptersReplaced&) = delete;

 private:
  std::unordered_map<const LoraFactorImpl*, torch::Tensor> weights_;
  const std::unordered_map<const LoraFactorImpl*, torch::Tensor>* previous_;
};

// The adapter on `owner`'s expert group weight `weight` ("gate_up_proj"), or none.
LoraAdapter expert_lora_adapter(const torch::nn::Module& owner, const std::string& weight);
// The same for one of quantizable_weights(root): none unless it is an expert group's (3-D).
LoraAdapter expert_lora_adapter(const QuantizableWeight& weight);
// Its update of every expert's weight: (alpha / r) · B_e A_e stacked, [E, out, in].
torch::Tensor expert_lora_delta(const LoraAdapter& adapter, int64_t experts);

// The adapter's update of `x` (the Linear's input): (alpha / r) · B A dropout(x), with dropout
// only while `training`.
torch::Tensor lora_update(const LoraAdapter& adapter, const torch::Tensor& x, bool training);

// Freezes every parameter of `root` and gives each Linear and each expert group weight that
// options.targets names an adapter: A from kaiming_uniform(a = sqrt(5)) under the torch seed
// (peft's default), B zero, so the adapted model starts as the base. Throws UsageError naming a
// target that matches no Linear or expert weight, and listing some of the model's names, one
// naming the output head (lm_head), which the fused loss reads as a weight, and one for dropout
// on an expert group's adapter.
void attach_lora(torch::nn::Module& root, const LoraOptions& options);

// The base's parameters with every adapter folded into its Linear, W + (alpha / r) · B A, named
// as a model without adapters names them (what a Hugging Face export writes); a quantized base's
// weights dequantized, in the dtype the base is held in.
NamedTensors merged_lora_weights(const torch::nn::Module& root);

// Whether `name` is an adapter's parameter ("....lora_A.weight").
bool is_lora_parameter(const std::string& name);
// UsageError (one line) for an adapter on the expert group weight `expert_weight` with dropout:
// its update is added to the weights, where no input dropout can go (peft refuses it too).
void require_no_expert_dropout(double dropout, const std::string& expert_weight);

// config's LoRA settings: rank, alpha, dropout, lora_targets_of and --lora_target_parameters.
LoraOptions lora_options(const config::Config& config,
                         const std::vector<std::string>& family_defaults);

// UsageError naming the first of --lora_target_parameters' `parameters` that matches none of
// `expert_weights` (expert group weights' names), and some of those.
void require_parameters_match(const std::vector<std::string>& parameters,
                              const std::vector<std::string>& expert_weights);

// --lora_targets' comma-separated names, trimmed, empty items left out.
std::vector<std::string> split_lora_targets(const std::string& text);

// --base_dtype nf4 or int8 stores a LoRA run's frozen base: a UsageError, one line, without
// --lora_rank, or with mixed_precision fp8 (whose Linears would not read the quantized base).
void require_base_dtype(const config::Config& config);

// The targets config's model adapts: --lora_targets, else `family_defaults` (its family's
// ModelFamily::lora_targets). UsageError for a family that takes no adapters (no defaults).
std::vector<std::string> lora_targets_of(const config::Config& config,
                                         const std::vector<std::string>& family_defaults);

// UsageError naming the first of `targets` that matches none of `linears` (module names, then
// expert group weights' names), and some of those.
void require_targets_match(const std::vector<std::string>& targets,
                           const std::vector<std::string>& linears);

}  // namespace ampt::models

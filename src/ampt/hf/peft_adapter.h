// LoRA adapters in peft's files: adapter_model.safetensors with names
// "base_model.model.<the Hugging Face model's module>.lora_A.weight" and adapter_config.json,
// what PeftModel.from_pretrained(base, dir) loads and save_pretrained writes.
#pragma once

#include "ampt/config/catalog.h"
#include "ampt/core/named_tensors.h"

#include <map>
#include <string>

namespace ampt::hf {

// peft's target_modules rule: `module` is `target`, or ends in "." + target (target_parameters
// match a weight's dotted name the same way).
bool peft_target_matches(const std::string& module, const std::string& target);

// peft's name (after "base_model.model." and the module prefix) of each of ampt's adapter tensors
// `adapters` (named "<adapted>.lora_A.weight" / ".lora_B.weight"), in order. A Linear's adapter
// keeps its name. An expert group weight's adapter (ampt's "<experts>.<weight>.lora_A.weight",
// told apart by A's r · E rows against `rank`) goes under its module as peft's nested
// ParamWrappers name it: of the n adapted weights of one module, in module order, the i-th is
// "<experts>." + "base_layer." × (n - 1 - i) + "lora_A.weight".
std::vector<std::string> peft_tensor_names(const NamedTensors& adapters, int64_t rank);

// Whether `dir` is an adapter's directory (it holds adapter_config.json).
bool is_peft_adapter(const std::string& dir);

// Reads `dir`/adapter_config.json, with target_parameters (the expert weights an adapter is
// added to) apart from target_modules. Throws RuntimeError naming the file and the field for a
// file that is not JSON, a peft_type other than LORA, a missing or mistyped r, lora_alpha or
// target_modules, and the peft options ampt does not train when set (use_dora, use_rslora,
// lora_bias, bias other than "none", modules_to_save, layers_to_transform, rank_pattern,
// alpha_pattern, exclude_modules, ...).
config::AdapterSettings read_peft_adapter_config(const std::string& dir);

// The adapter tensors of `dir`/adapter_model.safetensors in ampt's names, fp32: the prefix
// "base_model.model." + `module_prefix` ("transformer.", "model.") taken off, and peft's adapter
// name ("lora_A.default.weight") too; an expert group weight's adapter renamed from peft's
// nesting to the name `expected` (the model's adapters, peft_tensor_names with `rank`) gives it.
// A name outside that form is one RuntimeError line naming the file and the tensor.
NamedTensors read_peft_adapter(const std::string& dir, const std::string& module_prefix,
                               const NamedTensors& expected, int64_t rank);

// Writes the directory `dir` whole (export_directory.h: an earlier export there is replaced,
// nothing is left on a failure): adapter_model.safetensors from ampt's adapter `weights`
// (names ending in .lora_A.weight / .lora_B.weight) under peft's names (peft_tensor_names), with
// `metadata`, and adapter_config.json from `config` (task CAUSAL_LM; `fan_in_fan_out` for GPT-2's
// Conv1D): target_modules the targets that name an adapted Linear, target_parameters the adapted
// expert weights as "<module>.<weight>" from their last three names ("mlp.experts.down_proj").
void write_peft_adapter(const std::string& dir, const NamedTensors& weights,
                        const std::string& module_prefix, const config::AdapterSettings& config,
                        bool fan_in_fan_out, const std::map<std::string, std::string>& metadata);

}  // namespace ampt::hf

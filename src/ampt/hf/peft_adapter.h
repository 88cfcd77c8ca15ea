// LoRA adapters in peft's files: adapter_model.safetensors with names
// "base_model.model.<the Hugging Face model's module>.lora_A.weight" and adapter_config.json,
// what PeftModel.from_pretrained(base, dir) loads and save_pretrained writes.
#pragma once

#include "ampt/config/catalog.h"
#include "ampt/core/named_tensors.h"

#include <map>
#include <string>

namespace ampt::hf {

// Whether `dir` is an adapter's directory (it holds adapter_config.json).
bool is_peft_adapter(const std::string& dir);

// Reads `dir`/adapter_config.json. Throws RuntimeError naming the file and the field for a file
// that is not JSON, a peft_type other than LORA, a missing or mistyped r, lora_alpha or
// target_modules, and the peft options ampt does not train when set (use_dora, use_rslora,
// lora_bias, bias other than "none", modules_to_save, layers_to_transform, rank_pattern,
// alpha_pattern, exclude_modules, ...).
config::AdapterSettings read_peft_adapter_config(const std::string& dir);

// The adapter tensors of `dir`/adapter_model.safetensors in ampt's names, fp32: the prefix
// "base_model.model." + `module_prefix` ("transformer.", "model.") taken off, and peft's adapter
// name ("lora_A.default.weight") too. A name outside that form is one RuntimeError line naming
// the file and the tensor.
NamedTensors read_peft_adapter(const std::string& dir, const std::string& module_prefix);

// Creates `dir` when needed and writes adapter_model.safetensors from ampt's adapter `weights`
// (names ending in .lora_A.weight / .lora_B.weight) under peft's names, with `metadata`, and
// adapter_config.json from `config` (task CAUSAL_LM; `fan_in_fan_out` for GPT-2's Conv1D).
void write_peft_adapter(const std::string& dir, const NamedTensors& weights,
                        const std::string& module_prefix, const config::AdapterSettings& config,
                        bool fan_in_fan_out, const std::map<std::string, std::string>& metadata);

}  // namespace ampt::hf

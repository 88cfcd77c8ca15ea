// LoRA adapters in peft's files: adapter_model.safetensors with names
// "base_model.model.<the Hugging Face model's module>.lora_A.weight" and adapter_config.json,
// what PeftModel.from_pretrained(base, dir) loads and save_pretrained writes.
#pragma once

#include "ampt/config/peft_adapter.h"
#include "ampt/core/named_tensors.h"

#include <map>
#include <string>

namespace ampt::hf {

// The adapter tensors of `dir`/adapter_model.safetensors in ampt's names, fp32: the prefix
// "base_model.model." + `module_prefix` ("transformer.", "model.") taken off, and peft's adapter
// name ("lora_A.default.weight") too. A name outside that form is one RuntimeError line naming
// the file and the tensor.
NamedTensors read_peft_adapter(const std::string& dir, const std::string& module_prefix);

// Creates `dir` when needed and writes adapter_model.safetensors from ampt's adapter `weights`
// (names ending in .lora_A.weight / .lora_B.weight) under peft's names, with `metadata`, and
// adapter_config.json from `config` (task CAUSAL_LM; `fan_in_fan_out` for GPT-2's Conv1D).
void write_peft_adapter(const std::string& dir, const NamedTensors& weights,
                        const std::string& module_prefix, const config::PeftAdapterConfig& config,
                        bool fan_in_fan_out, const std::map<std::string, std::string>& metadata);

}  // namespace ampt::hf

// --init_from naming a peft LoRA adapter: a directory with adapter_config.json and
// adapter_model.safetensors, as PeftModel.save_pretrained writes it and `ampt export --format
// peft` too. Its settings become the run's LoRA settings and its base the run's init_from.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ampt::config {

// adapter_config.json's fields that ampt reads.
struct PeftAdapterConfig {
  std::string base_model;  // base_model_name_or_path; may be empty
  int64_t rank = 0;        // r
  double alpha = 0.0;      // lora_alpha
  double dropout = 0.0;    // lora_dropout
  std::vector<std::string> targets;  // target_modules
};

// Whether `dir` is an adapter's directory (it holds adapter_config.json).
bool is_peft_adapter(const std::string& dir);

// Reads `dir`/adapter_config.json. Throws RuntimeError naming the file and the field for a file
// that is not JSON, a peft_type other than LORA, a missing or mistyped r, lora_alpha or
// target_modules, and the peft options ampt does not train when set (use_dora, use_rslora,
// lora_bias, bias other than "none", modules_to_save, layers_to_transform, rank_pattern,
// alpha_pattern, exclude_modules, ...).
PeftAdapterConfig read_peft_adapter_config(const std::string& dir);

}  // namespace ampt::config

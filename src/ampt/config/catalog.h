// What config cannot know by itself, supplied by the layers above it (models::catalog(): the
// family table, with hf/ reading the files): the model names --model accepts, and what the
// Hugging Face files --init_from names say. config opens none of those files and compares no
// model name.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace ampt::config {

// A peft LoRA adapter's settings (its adapter_config.json), which become the run's LoRA settings.
struct AdapterSettings {
  std::string base_model;  // base_model_name_or_path; may be empty
  int64_t rank = 0;        // r
  double alpha = 0.0;      // lora_alpha
  double dropout = 0.0;    // lora_dropout
  std::vector<std::string> targets;  // target_modules
  std::vector<std::string> parameters;  // target_parameters
};

struct Catalog {
  // Every --model value.
  std::vector<std::string> models;
  // The --model value whose family loads --init_from's model (`init_from` a directory or a name
  // in `hub_cache`). RuntimeError, one line naming the file, when no family does.
  std::function<std::string(const std::string& init_from, const std::string& hub_cache)>
      pretrained_model;
  // The adapter in directory `dir`; nullopt when `dir` holds none. RuntimeError, one line naming
  // the file and field, for an adapter ampt cannot train.
  std::function<std::optional<AdapterSettings>(const std::string& dir)> adapter;
};

}  // namespace ampt::config

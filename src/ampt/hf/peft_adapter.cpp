#include "ampt/hf/peft_adapter.h"

#include "ampt/checkpoint/atomic_file.h"
#include "ampt/checkpoint/safetensors.h"
#include "ampt/core/errors.h"
#include "ampt/core/json_text.h"

#include <fmt/format.h>

#include <filesystem>

namespace ampt::hf {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kPeftPrefix = "base_model.model.";

}  // namespace

NamedTensors read_peft_adapter(const std::string& dir, const std::string& module_prefix) {
  const auto path = (fs::path(dir) / "adapter_model.safetensors").string();
  if (!fs::exists(path)) {
    throw RuntimeError(fmt::format("{} not found: a peft adapter directory holds "
                                   "adapter_model.safetensors beside adapter_config.json",
                                   path));
  }
  const std::string prefix = std::string(kPeftPrefix) + module_prefix;
  NamedTensors out;
  for (auto& [name, tensor] : checkpoint::read_safetensors(path)) {
    std::string ours = name;
    for (const char* factor : {".lora_A.", ".lora_B."}) {
      const auto at = ours.find(std::string(factor) + "default.");
      if (at != std::string::npos) ours.erase(at + std::string(factor).size(), 8);
    }
    if (!ours.starts_with(prefix) || !(ours.ends_with(".lora_A.weight") || ours.ends_with(".lora_B.weight"))) {
      throw RuntimeError(fmt::format(
          "{}: tensor '{}' is not a LoRA factor of this model (expected {}<module>.lora_A.weight "
          "or .lora_B.weight)",
          path, name, prefix));
    }
    out.emplace_back(ours.substr(prefix.size()), tensor.to(torch::kFloat));
  }
  return out;
}

void write_peft_adapter(const std::string& dir, const NamedTensors& weights,
                        const std::string& module_prefix, const config::PeftAdapterConfig& config,
                        bool fan_in_fan_out, const std::map<std::string, std::string>& metadata) {
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) throw RuntimeError(fmt::format("cannot create '{}': {}", dir, error.message()));
  NamedTensors renamed;
  for (const auto& [name, tensor] : weights) {
    renamed.emplace_back(std::string(kPeftPrefix) + module_prefix + name, tensor);
  }
  checkpoint::write_safetensors((fs::path(dir) / "adapter_model.safetensors").string(), renamed,
                                metadata);
  std::string targets;
  for (const auto& t : config.targets) targets += (targets.empty() ? "" : ", ") + json_string(t);
  const auto json = fmt::format(
      "{{\n"
      "  \"peft_type\": \"LORA\",\n"
      "  \"task_type\": \"CAUSAL_LM\",\n"
      "  \"base_model_name_or_path\": {},\n"
      "  \"r\": {},\n"
      "  \"lora_alpha\": {},\n"
      "  \"lora_dropout\": {},\n"
      "  \"target_modules\": [{}],\n"
      "  \"fan_in_fan_out\": {},\n"
      "  \"bias\": \"none\",\n"
      "  \"init_lora_weights\": true,\n"
      "  \"inference_mode\": true,\n"
      "  \"use_rslora\": false,\n"
      "  \"use_dora\": false,\n"
      "  \"modules_to_save\": null\n"
      "}}\n",
      json_string(config.base_model), config.rank, json_number(config.alpha),
      json_number(config.dropout), targets, fan_in_fan_out ? "true" : "false");
  checkpoint::write_file_atomically((fs::path(dir) / "adapter_config.json").string(), json);
}

}  // namespace ampt::hf

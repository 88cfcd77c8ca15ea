#include "ampt/hf/peft_adapter.h"

#include "ampt/checkpoint/atomic_file.h"
#include "ampt/checkpoint/safetensors.h"
#include "ampt/core/errors.h"
#include "ampt/core/json_reader.h"
#include "ampt/core/json_text.h"
#include "ampt/core/whole_file.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>

namespace ampt::hf {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kPeftPrefix = "base_model.model.";


// A field that is absent, null, false or empty leaves peft's behaviour at LoRA's plain default.
bool is_unset(const JsonValue* value) {
  if (value == nullptr) return true;
  switch (value->kind) {
    case JsonValue::Kind::null: return true;
    case JsonValue::Kind::boolean: return !value->boolean;
    case JsonValue::Kind::array: return value->items.empty();
    case JsonValue::Kind::object: return value->members.empty();
    default: return false;
  }
}

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
                        const std::string& module_prefix, const config::AdapterSettings& config,
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

bool is_peft_adapter(const std::string& dir) {
  return fs::is_regular_file(fs::path(dir) / "adapter_config.json");
}

config::AdapterSettings read_peft_adapter_config(const std::string& dir) {
  const auto path = (fs::path(dir) / "adapter_config.json").string();
  JsonValue root;
  try {
    root = parse_json(read_whole_file(path));
  } catch (const JsonError& e) {
    throw RuntimeError(fmt::format("{} is not JSON: {}", path, e.what()));
  }
  if (root.kind != JsonValue::Kind::object) {
    throw RuntimeError(fmt::format("{} holds {}, not an object", path, root.kind_name()));
  }
  const auto bad = [&](const std::string& field, const std::string& problem) {
    return RuntimeError(fmt::format("{}: {} {}", path, field, problem));
  };
  if (const auto* type = root.find("peft_type");
      type != nullptr && !(type->kind == JsonValue::Kind::string && type->string == "LORA")) {
    throw bad("peft_type", fmt::format("is {}: ampt trains LORA adapters only",
                                       type->kind == JsonValue::Kind::string ? "'" + type->string + "'"
                                                                             : type->kind_name()));
  }
  const auto number = [&](const char* field) {
    const auto* value = root.find(field);
    if (value == nullptr || value->kind != JsonValue::Kind::number) {
      throw bad(field, value == nullptr ? "is missing" : fmt::format("is {}, not a number", value->kind_name()));
    }
    return value->number;
  };
  config::AdapterSettings config;
  const double rank = number("r");
  if (rank < 1 || rank != std::floor(rank)) throw bad("r", fmt::format("is {}: expected an integer >= 1", rank));
  config.rank = static_cast<int64_t>(rank);
  config.alpha = number("lora_alpha");
  if (const auto* dropout = root.find("lora_dropout"); dropout != nullptr) config.dropout = number("lora_dropout");
  const auto* targets = root.find("target_modules");
  if (targets != nullptr && targets->kind == JsonValue::Kind::string) {
    config.targets = {targets->string};
  } else if (targets != nullptr && targets->kind == JsonValue::Kind::array) {
    for (const auto& item : targets->items) {
      if (item.kind != JsonValue::Kind::string) throw bad("target_modules", "holds a non-string item");
      config.targets.push_back(item.string);
    }
  } else {
    throw bad("target_modules", targets == nullptr ? "is missing" : "is not a list of module names");
  }
  if (const auto* base = root.find("base_model_name_or_path");
      base != nullptr && base->kind == JsonValue::Kind::string) {
    config.base_model = base->string;
  }
  for (const char* field :
       {"use_dora", "use_rslora", "use_qalora", "lora_bias", "modules_to_save",
        "layers_to_transform", "rank_pattern", "alpha_pattern", "exclude_modules",
        "target_parameters", "trainable_token_indices", "layer_replication"}) {
    if (!is_unset(root.find(field))) throw bad(field, "is set: ampt trains plain LoRA adapters only");
  }
  if (const auto* bias = root.find("bias");
      bias != nullptr && !(bias->kind == JsonValue::Kind::string && bias->string == "none")) {
    throw bad("bias", "is not \"none\": ampt's adapters train no biases");
  }
  return config;
}

}  // namespace ampt::hf

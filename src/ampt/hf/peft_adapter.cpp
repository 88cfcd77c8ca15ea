#include "ampt/hf/peft_adapter.h"

#include "ampt/checkpoint/atomic_file.h"
#include "ampt/checkpoint/safetensors.h"
#include "ampt/core/errors.h"
#include "ampt/core/json_reader.h"
#include "ampt/core/json_text.h"
#include "ampt/core/whole_file.h"
#include "ampt/hf/export_directory.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>

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

constexpr std::string_view kDownSuffix = ".lora_A.weight";
constexpr std::string_view kUpSuffix = ".lora_B.weight";

// The adapted module or weight of an adapter tensor's name; empty when it is none.
std::string adapted_of(const std::string& name) {
  for (const auto suffix : {kDownSuffix, kUpSuffix}) {
    if (name.ends_with(suffix)) return name.substr(0, name.size() - suffix.size());
  }
  return "";
}

// The adapted expert weights among `adapters` (A's rows are r · E, not r), in order.
std::vector<std::string> expert_weights(const NamedTensors& adapters, int64_t rank) {
  std::vector<std::string> out;
  for (const auto& [name, tensor] : adapters) {
    if (name.ends_with(kDownSuffix) && tensor.size(0) != rank) out.push_back(adapted_of(name));
  }
  return out;
}

// The last `n` dotted names of `name` ("mlp.experts.down_proj" of
// "layers.1.mlp.experts.down_proj"); all of it when it has fewer.
std::string last_names(const std::string& name, int n) {
  auto start = name.size();
  for (int i = 0; i < n; ++i) {
    const auto dot = start == 0 ? std::string::npos : name.rfind('.', start - 1);
    if (dot == std::string::npos) return name;
    start = dot;
  }
  return name.substr(start + 1);
}

std::string json_list(const std::vector<std::string>& items) {
  std::string text;
  for (const auto& item : items) text += (text.empty() ? "" : ", ") + json_string(item);
  return text;
}

// A list field of strings (or one string), appended to `out`; absent: nothing.
void read_names(const JsonValue* value, const char* field, std::vector<std::string>& out,
                const std::function<RuntimeError(const std::string&, const std::string&)>& bad) {
  if (value == nullptr || value->kind == JsonValue::Kind::null) return;
  if (value->kind == JsonValue::Kind::string) {
    out.push_back(value->string);
    return;
  }
  if (value->kind != JsonValue::Kind::array) throw bad(field, "is not a list of names");
  for (const auto& item : value->items) {
    if (item.kind != JsonValue::Kind::string) throw bad(field, "holds a non-string item");
    out.push_back(item.string);
  }
}

}  // namespace

bool peft_target_matches(const std::string& module, const std::string& target) {
  return module == target || (module.size() > target.size() && module.ends_with(target) &&
                              module[module.size() - target.size() - 1] == '.');
}

std::vector<std::string> peft_tensor_names(const NamedTensors& adapters, int64_t rank) {
  const auto experts = expert_weights(adapters, rank);
  const auto owner = [](const std::string& weight) { return weight.substr(0, weight.rfind('.')); };
  std::vector<std::string> out;
  for (const auto& [name, tensor] : adapters) {
    const auto adapted = adapted_of(name);
    const auto it = std::ranges::find(experts, adapted);
    if (it == experts.end()) {
      out.push_back(name);
      continue;
    }
    // Wrapped later by peft, so outside: the adapted weights of the same module after this one.
    const auto module = owner(adapted);
    const auto later = std::count_if(it + 1, experts.end(), [&](const std::string& w) {
      return owner(w) == module;
    });
    std::string peft = module + ".";
    for (int64_t i = 0; i < later; ++i) peft += "base_layer.";
    out.push_back(peft + name.substr(adapted.size() + 1));
  }
  return out;
}

NamedTensors read_peft_adapter(const std::string& dir, const std::string& module_prefix,
                               const NamedTensors& expected, int64_t rank) {
  const auto path = (fs::path(dir) / "adapter_model.safetensors").string();
  if (!fs::exists(path)) {
    throw RuntimeError(fmt::format("{} not found: a peft adapter directory holds "
                                   "adapter_model.safetensors beside adapter_config.json",
                                   path));
  }
  const std::string prefix = std::string(kPeftPrefix) + module_prefix;
  std::map<std::string, std::string> ours_of;  // peft's name → ampt's, where they differ
  const auto peft_names = peft_tensor_names(expected, rank);
  for (size_t i = 0; i < expected.size(); ++i) {
    if (peft_names[i] != expected[i].first) ours_of.emplace(peft_names[i], expected[i].first);
  }
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
    ours = ours.substr(prefix.size());
    if (const auto it = ours_of.find(ours); it != ours_of.end()) ours = it->second;
    out.emplace_back(ours, tensor.to(torch::kFloat));
  }
  return out;
}

void write_peft_adapter(const std::string& dir, const NamedTensors& weights,
                        const std::string& module_prefix, const config::AdapterSettings& config,
                        bool fan_in_fan_out, const std::map<std::string, std::string>& metadata) {
  NamedTensors renamed;
  const auto peft_names = peft_tensor_names(weights, config.rank);
  for (size_t i = 0; i < weights.size(); ++i) {
    renamed.emplace_back(std::string(kPeftPrefix) + module_prefix + peft_names[i],
                         weights[i].second);
  }
  ExportDirectory out(dir);
  checkpoint::write_safetensors((fs::path(out.path()) / "adapter_model.safetensors").string(), renamed,
                                metadata);
  // The targets that name an adapted Linear are peft's target_modules; the adapted expert
  // weights, by their module's last two names and their own, its target_parameters.
  const auto experts = expert_weights(weights, config.rank);
  std::vector<std::string> modules, parameters;
  for (const auto& target : config.targets) {
    if (std::ranges::any_of(weights, [&](const auto& item) {
          const auto adapted = adapted_of(item.first);
          return std::ranges::find(experts, adapted) == experts.end() &&
                 peft_target_matches(adapted, target);
        })) {
      modules.push_back(target);
    }
  }
  for (const auto& weight : experts) {
    const auto suffix = last_names(weight, 3);
    if (std::ranges::find(parameters, suffix) == parameters.end()) parameters.push_back(suffix);
  }
  const auto json = fmt::format(
      "{{\n"
      "  \"peft_type\": \"LORA\",\n"
      "  \"task_type\": \"CAUSAL_LM\",\n"
      "  \"base_model_name_or_path\": {},\n"
      "  \"r\": {},\n"
      "  \"lora_alpha\": {},\n"
      "  \"lora_dropout\": {},\n"
      "  \"target_modules\": [{}],\n"
      "  \"target_parameters\": {},\n"
      "  \"fan_in_fan_out\": {},\n"
      "  \"bias\": \"none\",\n"
      "  \"init_lora_weights\": true,\n"
      "  \"inference_mode\": true,\n"
      "  \"use_rslora\": false,\n"
      "  \"use_dora\": false,\n"
      "  \"modules_to_save\": null\n"
      "}}\n",
      json_string(config.base_model), config.rank, json_number(config.alpha),
      json_number(config.dropout), json_list(modules),
      parameters.empty() ? std::string("null") : "[" + json_list(parameters) + "]",
      fan_in_fan_out ? "true" : "false");
  checkpoint::write_file_atomically((fs::path(out.path()) / "adapter_config.json").string(), json);
  out.commit();
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
  if (targets == nullptr) throw bad("target_modules", "is missing");
  read_names(targets, "target_modules", config.targets, bad);
  read_names(root.find("target_parameters"), "target_parameters", config.parameters, bad);
  if (config.targets.empty() && config.parameters.empty()) {
    throw bad("target_modules", "names no module, and target_parameters no weight");
  }
  if (const auto* base = root.find("base_model_name_or_path");
      base != nullptr && base->kind == JsonValue::Kind::string) {
    config.base_model = base->string;
  }
  for (const char* field :
       {"use_dora", "use_rslora", "use_qalora", "lora_bias", "modules_to_save",
        "layers_to_transform", "rank_pattern", "alpha_pattern", "exclude_modules",
        "trainable_token_indices", "layer_replication"}) {
    if (!is_unset(root.find(field))) throw bad(field, "is set: ampt trains plain LoRA adapters only");
  }
  if (const auto* bias = root.find("bias");
      bias != nullptr && !(bias->kind == JsonValue::Kind::string && bias->string == "none")) {
    throw bad("bias", "is not \"none\": ampt's adapters train no biases");
  }
  return config;
}

}  // namespace ampt::hf

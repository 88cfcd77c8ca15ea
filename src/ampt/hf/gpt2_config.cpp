#include "ampt/hf/gpt2_config.h"

#include "ampt/core/errors.h"
#include "ampt/core/json_text.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

namespace ampt::hf {
namespace {

template <class T>
T required(const YAML::Node& root, const std::string& key, const std::string& path) {
  const auto node = root[key];
  if (!node || node.IsNull()) throw RuntimeError(fmt::format("{}: no {}", path, key));
  try {
    return node.as<T>();
  } catch (const YAML::Exception&) {
    throw RuntimeError(fmt::format("{}: {} is not a number", path, key));
  }
}

// A key that must hold `expected` when present (its default in transformers is `expected`).
void require_default(const YAML::Node& root, const std::string& key, bool expected,
                     const std::string& path) {
  const auto node = root[key];
  if (!node || node.IsNull() || node.as<bool>() == expected) return;
  throw RuntimeError(fmt::format("{}: {} is {}, which ampt's GPT does not implement (it needs {})",
                                 path, key, node.as<std::string>(), expected ? "true" : "false"));
}

}  // namespace

Gpt2Config read_gpt2_config(const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);  // JSON is YAML
  } catch (const YAML::Exception& e) {
    throw RuntimeError(fmt::format("{}: not JSON ({})", path, e.msg));
  }
  if (!root.IsMap()) throw RuntimeError(path + ": not a JSON object");
  if (const auto type = root["model_type"]; type && type.as<std::string>() != "gpt2") {
    throw RuntimeError(fmt::format("{}: model_type is {}, ampt loads gpt2 models only", path,
                                   type.as<std::string>()));
  }
  Gpt2Config config;
  config.n_layer = required<int64_t>(root, "n_layer", path);
  config.n_embd = required<int64_t>(root, "n_embd", path);
  config.n_head = required<int64_t>(root, "n_head", path);
  config.n_positions = required<int64_t>(root, "n_positions", path);
  config.vocab_size = required<int64_t>(root, "vocab_size", path);
  if (root["layer_norm_epsilon"]) config.layer_norm_epsilon = required<double>(root, "layer_norm_epsilon", path);
  if (root["activation_function"]) {
    config.activation_function = root["activation_function"].as<std::string>();
    const auto& a = config.activation_function;
    if (a != "gelu_new" && a != "gelu_pytorch_tanh" && a != "gelu") {
      throw RuntimeError(fmt::format("{}: activation_function {} is not one ampt's GPT runs "
                                     "(gelu_new, gelu_pytorch_tanh or gelu)",
                                     path, a));
    }
  }
  if (const auto inner = root["n_inner"]; inner && !inner.IsNull() &&
                                         inner.as<int64_t>() != 4 * config.n_embd) {
    throw RuntimeError(fmt::format("{}: n_inner {} is not 4 x n_embd ({}), the MLP width ampt's "
                                   "GPT has",
                                   path, inner.as<int64_t>(), 4 * config.n_embd));
  }
  require_default(root, "add_cross_attention", false, path);
  require_default(root, "scale_attn_weights", true, path);
  require_default(root, "scale_attn_by_inverse_layer_idx", false, path);
  require_default(root, "reorder_and_upcast_attn", false, path);
  if (root["bos_token_id"] && !root["bos_token_id"].IsNull()) config.bos_token_id = root["bos_token_id"].as<int64_t>();
  if (root["eos_token_id"] && !root["eos_token_id"].IsNull()) config.eos_token_id = root["eos_token_id"].as<int64_t>();
  for (const auto* key : {"n_layer", "n_embd", "n_head", "n_positions", "vocab_size"}) {
    if (root[key].as<int64_t>() <= 0) {
      throw RuntimeError(fmt::format("{}: {} is {}, not a positive size", path, key,
                                     root[key].as<int64_t>()));
    }
  }
  if (config.n_embd % config.n_head != 0) {
    throw RuntimeError(fmt::format("{}: n_embd {} is not a multiple of n_head {}", path,
                                   config.n_embd, config.n_head));
  }
  return config;
}

std::string gpt2_config_json(const Gpt2Config& c) {
  return fmt::format(
      "{{\n"
      "  \"architectures\": [\"GPT2LMHeadModel\"],\n"
      "  \"model_type\": \"gpt2\",\n"
      "  \"n_layer\": {},\n  \"n_embd\": {},\n  \"n_head\": {},\n  \"n_positions\": {},\n"
      "  \"n_ctx\": {},\n  \"vocab_size\": {},\n  \"n_inner\": null,\n"
      "  \"layer_norm_epsilon\": {},\n  \"activation_function\": {},\n"
      "  \"resid_pdrop\": 0.0,\n  \"embd_pdrop\": 0.0,\n  \"attn_pdrop\": 0.0,\n"
      "  \"initializer_range\": 0.02,\n  \"scale_attn_weights\": true,\n"
      "  \"tie_word_embeddings\": true,\n  \"use_cache\": true,\n"
      "  \"bos_token_id\": {},\n  \"eos_token_id\": {}\n"
      "}}\n",
      c.n_layer, c.n_embd, c.n_head, c.n_positions, c.n_positions, c.vocab_size,
      json_number(c.layer_norm_epsilon), json_string(c.activation_function),
      json_optional_int(c.bos_token_id), json_optional_int(c.eos_token_id));
}

}  // namespace ampt::hf

#include "ampt/hf/llama_config.h"

#include "ampt/core/errors.h"
#include "ampt/core/json_reader.h"
#include "ampt/core/json_text.h"
#include "ampt/core/whole_file.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

namespace ampt::hf {
namespace {

class ConfigFile {
 public:
  explicit ConfigFile(std::string path) : path_(std::move(path)) {
    const auto text = read_whole_file(path_);
    try {
      root_ = parse_json(text);
    } catch (const JsonError& e) {
      fail(fmt::format("not JSON ({})", e.what()));
    }
    if (root_.kind != JsonValue::Kind::object) fail("not a JSON object");
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw RuntimeError(fmt::format("{}: {}", path_, what));
  }

  const JsonValue* find(const JsonValue& object, std::string_view key) const {
    const JsonValue* value = object.find(key);
    return value == nullptr || value->kind == JsonValue::Kind::null ? nullptr : value;
  }
  const JsonValue* find(std::string_view key) const { return find(root_, key); }
  // Whether the file names `key` at all, null included (find: only with a value).
  bool names(std::string_view key) const { return root_.find(key) != nullptr; }

  double number(const JsonValue& value, std::string_view key) const {
    if (value.kind != JsonValue::Kind::number) fail(fmt::format("{} is {}, not a number", key, value.kind_name()));
    return value.number;
  }

  int64_t size(std::string_view key) const {
    const JsonValue* value = find(key);
    if (value == nullptr) fail(fmt::format("no {}", key));
    const double n = number(*value, key);
    if (n <= 0 || n != std::floor(n)) fail(fmt::format("{} is {}, not a positive size", key, n));
    return static_cast<int64_t>(n);
  }

  std::string text(std::string_view key, std::string fallback) const {
    const JsonValue* value = find(key);
    if (value == nullptr) return fallback;
    if (value->kind != JsonValue::Kind::string) fail(fmt::format("{} is {}, not a string", key, value->kind_name()));
    return value->string;
  }

  bool flag(std::string_view key, bool fallback) const {
    const JsonValue* value = find(key);
    if (value == nullptr) return fallback;
    if (value->kind != JsonValue::Kind::boolean) fail(fmt::format("{} is {}, not true or false", key, value->kind_name()));
    return value->boolean;
  }

  std::vector<int64_t> ids(std::string_view key) const {
    const JsonValue* value = find(key);
    if (value == nullptr) return {};
    std::vector<int64_t> out;
    for (const JsonValue& item : value->kind == JsonValue::Kind::array ? value->items : std::vector<JsonValue>{*value}) {
      const double id = number(item, key);
      if (id < 0 || id != std::floor(id)) fail(fmt::format("{} holds {}, not a token id", key, id));
      out.push_back(static_cast<int64_t>(id));
    }
    return out;
  }

 private:
  std::string path_;
  JsonValue root_;
};

// The rotary settings: transformers 5's rope_parameters, else the hub's rope_theta and
// rope_scaling (which transformers converts the same way).
void read_rope(const ConfigFile& file, LlamaArchitecture& config) {
  const JsonValue* parameters = file.find("rope_parameters");
  const JsonValue* scaling = parameters != nullptr ? parameters : file.find("rope_scaling");
  if (const JsonValue* theta = file.find("rope_theta")) config.rope_theta = file.number(*theta, "rope_theta");
  if (scaling == nullptr) return;
  if (scaling->kind != JsonValue::Kind::object) {
    file.fail(fmt::format("{} is {}, not an object", parameters ? "rope_parameters" : "rope_scaling",
                          scaling->kind_name()));
  }
  if (const JsonValue* theta = file.find(*scaling, "rope_theta")) config.rope_theta = file.number(*theta, "rope_theta");
  const JsonValue* type = file.find(*scaling, "rope_type");
  if (type == nullptr) type = file.find(*scaling, "type");  // the hub's older spelling
  const std::string rope_type = type != nullptr && type->kind == JsonValue::Kind::string ? type->string : "default";
  if (rope_type == "default") return;
  if (rope_type != "llama3") {
    file.fail(fmt::format("rope_type {} is not one ampt's Llama implements (default or llama3)", rope_type));
  }
  RopeLlama3 s;
  const auto read = [&](std::string_view key, double& into) {
    const JsonValue* value = file.find(*scaling, key);
    if (value == nullptr) file.fail(fmt::format("rope_type llama3 without {}", key));
    into = file.number(*value, key);
  };
  double original = 0;
  read("factor", s.factor);
  read("low_freq_factor", s.low_freq_factor);
  read("high_freq_factor", s.high_freq_factor);
  read("original_max_position_embeddings", original);
  s.original_context = static_cast<int64_t>(original);
  if (s.high_freq_factor <= s.low_freq_factor) {
    file.fail(fmt::format("rope high_freq_factor {} is not above low_freq_factor {}",
                          s.high_freq_factor, s.low_freq_factor));
  }
  config.rope_llama3 = s;
}

// The experts of a qwen3_moe or mixtral config: Qwen3-MoE's hub files say num_experts and
// transformers 5 writes num_local_experts; Mixtral's experts are intermediate_size wide and
// always renormalised, and every block has them.
void read_experts(const ConfigFile& file, LlamaArchitecture& config) {
  const bool mixtral = config.flavour == "mixtral";
  auto& moe = config.moe;
  const char* count = file.find("num_experts") && !mixtral ? "num_experts" : "num_local_experts";
  moe.experts = file.size(count);
  moe.top_k = file.size("num_experts_per_tok");
  if (moe.top_k > moe.experts) {
    file.fail(fmt::format("num_experts_per_tok {} exceeds {} {}", moe.top_k, count, moe.experts));
  }
  if (const JsonValue* coef = file.find("router_aux_loss_coef")) {
    moe.aux_loss_coef = file.number(*coef, "router_aux_loss_coef");
  }
  if (mixtral) {
    moe.intermediate = config.intermediate;
    moe.normalize_top_k = true;
    return;
  }
  moe.intermediate = file.size("moe_intermediate_size");
  moe.normalize_top_k = file.flag("norm_topk_prob", false);
  if (file.find("decoder_sparse_step")) moe.sparse_step = file.size("decoder_sparse_step");
  moe.dense_layers = file.ids("mlp_only_layers");
  for (const int64_t layer : moe.dense_layers) {
    if (layer >= config.n_layer) {
      file.fail(fmt::format("mlp_only_layers holds {}, past num_hidden_layers {}", layer,
                            config.n_layer));
    }
  }
}

// The sliding window as transformers' config classes read it: Mistral's sliding_window (4096
// where the file has none, null: off) and Mixtral's (none unless given) over every layer; Qwen's
// only where use_sliding_window is true (then 4096 unless given), Qwen3-MoE's over every layer,
// Qwen2's and Qwen3's over the layers layer_types calls sliding_attention, or without
// layer_types those from max_window_layers (28 unless given) on.
void read_window(const ConfigFile& file, LlamaArchitecture& config) {
  const auto& type = config.flavour;
  const bool qwen = type == "qwen2" || type == "qwen3" || type == "qwen3_moe";
  if (type == "llama" || (qwen && !file.flag("use_sliding_window", false))) return;
  if (file.find("sliding_window")) {
    config.sliding_window = file.size("sliding_window");
  } else if (!file.names("sliding_window") && type != "mixtral") {
    config.sliding_window = 4096;
  }
  if (config.sliding_window == 0 || (type != "qwen2" && type != "qwen3")) return;
  auto& sliding = config.sliding_layers;
  if (const JsonValue* layers = file.find("layer_types")) {
    if (layers->kind != JsonValue::Kind::array || std::ssize(layers->items) != config.n_layer) {
      file.fail(fmt::format("layer_types is not a list of the {} layers' types", config.n_layer));
    }
    for (const JsonValue& layer : layers->items) {
      const bool known = layer.kind == JsonValue::Kind::string &&
                         (layer.string == "sliding_attention" || layer.string == "full_attention");
      if (!known) {
        file.fail(fmt::format("layer_types holds {}: sliding_attention and full_attention are allowed",
                              layer.kind == JsonValue::Kind::string ? layer.string : layer.kind_name()));
      }
      sliding.push_back(layer.string == "sliding_attention");
    }
  } else {
    const JsonValue* first = file.find("max_window_layers");
    const double from = first != nullptr ? file.number(*first, "max_window_layers") : 28;
    for (int64_t layer = 0; layer < config.n_layer; ++layer) sliding.push_back(layer >= from);
  }
  // One window for all, or none, as Mistral's: the same attention, said the short way.
  if (std::ranges::none_of(sliding, [](bool s) { return s; })) config.sliding_window = 0;
  if (config.sliding_window == 0 || std::ranges::all_of(sliding, [](bool s) { return s; })) sliding.clear();
}

// Settings that change the architecture away from the one ampt builds, refused by name.
void refuse_unsupported(const ConfigFile& file) {
  if (const auto act = file.text("hidden_act", "silu"); act != "silu") {
    file.fail(fmt::format("hidden_act {} is not the SwiGLU activation ampt's Llama has (silu)", act));
  }
  if (file.flag("mlp_bias", false)) file.fail("mlp_bias is true: ampt's Llama MLP has no biases");
  // LlamaForCausalLM has no window: a llama config asking for one is another model's.
  if (file.text("model_type", "") == "llama") {
    const auto refused = [&](const std::string& what) {
      file.fail(fmt::format("{}: a llama model has no sliding window; mistral, mixtral, qwen2, qwen3 "
                            "and qwen3_moe models have one",
                            what));
    };
    if (file.flag("use_sliding_window", false)) refused("use_sliding_window is true");
    if (const JsonValue* window = file.find("sliding_window")) {
      refused(window->kind == JsonValue::Kind::number ? fmt::format("sliding_window is {:g}", window->number)
                                                      : fmt::format("sliding_window is {}", window->kind_name()));
    }
    if (const JsonValue* layers = file.find("layer_types")) {
      for (const JsonValue& type : layers->items) {
        if (type.kind != JsonValue::Kind::string || type.string != "full_attention") {
          refused(fmt::format("layer_types holds {}",
                              type.kind == JsonValue::Kind::string ? type.string : type.kind_name()));
        }
      }
    }
  }
  const auto type = file.text("model_type", "");
  if (type != "qwen3_moe" && type != "mixtral") {
    for (const auto* key : {"num_experts", "num_local_experts", "n_routed_experts", "moe_intermediate_size"}) {
      if (const JsonValue* experts = file.find(key); experts != nullptr && !(experts->kind == JsonValue::Kind::number && experts->number == 0)) {
        file.fail(fmt::format("{} is set: ampt builds experts for qwen3_moe and mixtral models, "
                              "not model_type {}",
                              key, type));
      }
    }
  }
  // What other MoE routers add: a shared expert beside the routed ones (Qwen2-MoE), noise on
  // the router's input (Mixtral's jitter).
  for (const auto* key : {"shared_expert_intermediate_size", "n_shared_experts", "router_jitter_noise"}) {
    if (const JsonValue* value = file.find(key); value != nullptr && file.number(*value, key) != 0) {
      file.fail(fmt::format("{} is {:g}: ampt's router takes the routed experts alone, without "
                            "shared experts or jitter (0)",
                            key, value->number));
    }
  }
  if (const JsonValue* tp = file.find("pretraining_tp"); tp != nullptr && file.number(*tp, "pretraining_tp") != 1) {
    file.fail(fmt::format("pretraining_tp is {}: ampt reads the weights whole (1)", tp->number));
  }
}

// The Hugging Face class that reads a config of `model_type` back.
const char* architecture(const std::string& model_type) {
  if (model_type == "qwen2") return "Qwen2ForCausalLM";
  if (model_type == "qwen3") return "Qwen3ForCausalLM";
  if (model_type == "mistral") return "MistralForCausalLM";
  if (model_type == "qwen3_moe") return "Qwen3MoeForCausalLM";
  if (model_type == "mixtral") return "MixtralForCausalLM";
  return "LlamaForCausalLM";
}

}  // namespace

int64_t LlamaArchitecture::window(int64_t layer) const {
  if (sliding_window == 0) return 0;
  return sliding_layers.empty() || sliding_layers.at(static_cast<size_t>(layer)) ? sliding_window : 0;
}

bool MoeArchitecture::sparse(int64_t layer) const {
  return active() && (layer + 1) % sparse_step == 0 &&
         std::ranges::find(dense_layers, layer) == dense_layers.end();
}

LlamaConfig read_llama_config(const std::string& path) {
  const ConfigFile file(path);
  LlamaConfig config;
  config.flavour = file.text("model_type", "");
  const auto& type = config.flavour;
  if (type != "llama" && type != "qwen2" && type != "qwen3" && type != "mistral" &&
      type != "qwen3_moe" && type != "mixtral") {
    file.fail(fmt::format("model_type is {}, ampt's Llama loads llama, qwen2, qwen3, mistral, "
                          "qwen3_moe and mixtral models",
                          type.empty() ? "missing" : type));
  }
  const bool qwen2 = type == "qwen2", qwen3 = type == "qwen3", qwen3_moe = type == "qwen3_moe",
             mixtral = type == "mixtral", mistral = type == "mistral" || mixtral;
  config.n_embd = file.size("hidden_size");
  config.intermediate = file.size("intermediate_size");
  config.n_layer = file.size("num_hidden_layers");
  config.n_head = file.size("num_attention_heads");
  config.n_kv_head = file.find("num_key_value_heads") ? file.size("num_key_value_heads") : config.n_head;
  // Qwen3Config's head_dim is 128 unless given; the others' hidden_size / num_attention_heads.
  config.head_size = file.find("head_dim") ? file.size("head_dim") : qwen3 ? 128 : 0;
  config.block_size = file.size("max_position_embeddings");
  config.vocab_size = file.size("vocab_size");
  // transformers' default where the file has none.
  const JsonValue* eps = file.find("rms_norm_eps");
  config.rms_norm_eps = eps != nullptr ? file.number(*eps, "rms_norm_eps") : 1e-6;
  read_rope(file, config);
  // Qwen2's q/k/v always have biases, Mistral's layers never; Llama's and Qwen3's attention_bias
  // puts them on all four projections.
  const bool attention_bias = !mistral && file.flag("attention_bias", false);
  config.qkv_bias = qwen2 || attention_bias;
  config.o_bias = !qwen2 && attention_bias;
  config.qk_norm = qwen3 || qwen3_moe;
  if (qwen3_moe || mixtral) read_experts(file, config);
  read_window(file, config);
  config.tied_head = file.flag("tie_word_embeddings", false);
  if (const auto bos = file.ids("bos_token_id"); !bos.empty()) config.bos_token_id = bos.front();
  config.eos_token_ids = file.ids("eos_token_id");
  if (config.head_size == 0 && config.n_embd % config.n_head != 0) {
    file.fail(fmt::format("hidden_size {} is not a multiple of num_attention_heads {}",
                          config.n_embd, config.n_head));
  }
  if (config.n_head % config.n_kv_head != 0) {
    file.fail(fmt::format("num_attention_heads {} is not a multiple of num_key_value_heads {}",
                          config.n_head, config.n_kv_head));
  }
  if (config.head_dim() % 2 != 0) {
    file.fail(fmt::format("the head dimension {} is odd: rotary embeddings rotate pairs", config.head_dim()));
  }
  refuse_unsupported(file);
  return config;
}

std::string llama_config_json(const LlamaConfig& c) {
  // What each class reads besides the shared keys: Qwen's window switch and window (Qwen2's and
  // Qwen3's by layer), Qwen3's bias switch, Mistral's and Mixtral's window (null: off), Llama's
  // biases.
  const auto window = c.sliding_window > 0 ? std::to_string(c.sliding_window) : std::string("null");
  std::string qwen_window = fmt::format("  \"use_sliding_window\": {},\n  \"sliding_window\": {},\n",
                                        c.sliding_window > 0 ? "true" : "false", window);
  if (c.sliding_window > 0 && c.flavour != "qwen3_moe") {
    std::vector<std::string> types;
    int64_t leading_full = 0;
    for (int64_t layer = 0; layer < c.n_layer; ++layer) {
      types.push_back(c.window(layer) > 0 ? "\"sliding_attention\"" : "\"full_attention\"");
      if (c.window(layer) == 0 && leading_full == layer) ++leading_full;
    }
    // max_window_layers too, for readers older than layer_types.
    qwen_window += fmt::format("  \"max_window_layers\": {},\n  \"layer_types\": [{}],\n",
                               leading_full, fmt::join(types, ", "));
  }
  std::string own;
  if (c.flavour == "qwen2") {
    own = qwen_window;
  } else if (c.flavour == "qwen3") {
    own = fmt::format("  \"attention_bias\": {},\n{}", c.qkv_bias ? "true" : "false", qwen_window);
  } else if (c.flavour == "mistral") {
    own = fmt::format("  \"sliding_window\": {},\n", window);
  } else if (c.flavour == "qwen3_moe") {
    own = fmt::format(
        "  \"attention_bias\": {},\n{}"
        "  \"num_experts\": {},\n  \"num_experts_per_tok\": {},\n  \"moe_intermediate_size\": {},\n"
        "  \"norm_topk_prob\": {},\n  \"decoder_sparse_step\": {},\n  \"mlp_only_layers\": [{}],\n"
        "  \"router_aux_loss_coef\": {},\n",
        c.qkv_bias ? "true" : "false", qwen_window, c.moe.experts, c.moe.top_k, c.moe.intermediate,
        c.moe.normalize_top_k ? "true" : "false", c.moe.sparse_step,
        fmt::join(c.moe.dense_layers, ", "), json_float(c.moe.aux_loss_coef));
  } else if (c.flavour == "mixtral") {
    own = fmt::format(
        "  \"sliding_window\": {},\n  \"num_local_experts\": {},\n  \"num_experts_per_tok\": {},\n"
        "  \"router_aux_loss_coef\": {},\n  \"router_jitter_noise\": 0.0,\n",
        window, c.moe.experts, c.moe.top_k, json_float(c.moe.aux_loss_coef));
  } else {
    own = fmt::format("  \"attention_bias\": {},\n  \"mlp_bias\": false,\n", c.qkv_bias ? "true" : "false");
  }
  std::string rope = fmt::format("{{\"rope_type\": \"default\", \"rope_theta\": {}}}", json_number(c.rope_theta));
  if (c.rope_llama3) {
    const auto& s = *c.rope_llama3;
    rope = fmt::format(
        "{{\"rope_type\": \"llama3\", \"rope_theta\": {}, \"factor\": {}, \"low_freq_factor\": {}, "
        "\"high_freq_factor\": {}, \"original_max_position_embeddings\": {}}}",
        json_number(c.rope_theta), json_number(s.factor), json_number(s.low_freq_factor),
        json_number(s.high_freq_factor), s.original_context);
  }
  const auto eos = c.eos_token_ids.empty() ? std::string("null")
                   : c.eos_token_ids.size() == 1 ? std::to_string(c.eos_token_ids.front())
                                                 : fmt::format("[{}]", fmt::join(c.eos_token_ids, ", "));
  return fmt::format(
      "{{\n"
      "  \"architectures\": [\"{}\"],\n"
      "  \"model_type\": \"{}\",\n"
      "  \"hidden_size\": {},\n  \"intermediate_size\": {},\n  \"num_hidden_layers\": {},\n"
      "  \"num_attention_heads\": {},\n  \"num_key_value_heads\": {},\n  \"head_dim\": {},\n"
      "  \"max_position_embeddings\": {},\n  \"vocab_size\": {},\n  \"rms_norm_eps\": {},\n"
      "  \"hidden_act\": \"silu\",\n  \"rope_theta\": {},\n  \"rope_parameters\": {},\n"
      "{}"
      "  \"attention_dropout\": 0.0,\n  \"initializer_range\": 0.02,\n"
      "  \"tie_word_embeddings\": {},\n  \"use_cache\": true,\n  \"torch_dtype\": \"float32\",\n"
      "  \"bos_token_id\": {},\n  \"eos_token_id\": {}\n"
      "}}\n",
      architecture(c.flavour), c.flavour, c.n_embd, c.intermediate, c.n_layer, c.n_head,
      c.n_kv_head, c.head_dim(), c.block_size, c.vocab_size, json_number(c.rms_norm_eps),
      json_number(c.rope_theta), rope, own, c.tied_head ? "true" : "false",
      json_optional_int(c.bos_token_id), eos);
}

}  // namespace ampt::hf

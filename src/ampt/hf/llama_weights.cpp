#include "ampt/hf/llama_weights.h"

#include "ampt/core/errors.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>

namespace ampt::hf {
namespace {

struct Spec {
  std::string name;  // ampt's
  std::vector<int64_t> shape;
};

std::string hf_name(const std::string& name) {
  return name.starts_with("lm_head.") ? name : "model." + name;
}

std::vector<Spec> llama_specs(const LlamaConfig& c) {
  const int64_t C = c.hidden_size, D = c.head_dim(), q = c.num_attention_heads * D,
                kv = c.num_key_value_heads * D, F = c.intermediate_size;
  std::vector<Spec> specs = {{"embed_tokens.weight", {c.vocab_size, C}}};
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const auto p = fmt::format("layers.{}.", i);
    specs.push_back({p + "input_layernorm.weight", {C}});
    for (const auto& [proj, out] : {std::pair{"q_proj", q}, {"k_proj", kv}, {"v_proj", kv}}) {
      specs.push_back({p + "self_attn." + proj + ".weight", {out, C}});
      if (c.qkv_bias) specs.push_back({p + "self_attn." + proj + ".bias", {out}});
    }
    specs.push_back({p + "self_attn.o_proj.weight", {C, q}});
    if (c.o_bias) specs.push_back({p + "self_attn.o_proj.bias", {C}});
    if (c.qk_norm) {
      specs.push_back({p + "self_attn.q_norm.weight", {D}});
      specs.push_back({p + "self_attn.k_norm.weight", {D}});
    }
    specs.push_back({p + "post_attention_layernorm.weight", {C}});
    specs.push_back({p + "mlp.gate_proj.weight", {F, C}});
    specs.push_back({p + "mlp.up_proj.weight", {F, C}});
    specs.push_back({p + "mlp.down_proj.weight", {C, F}});
  }
  specs.push_back({"norm.weight", {C}});
  if (!c.tie_word_embeddings) specs.push_back({"lm_head.weight", {c.vocab_size, C}});
  return specs;
}

std::string describe(const LlamaConfig& c) {
  const auto* name = c.model_type == "qwen2"     ? "Qwen2"
                     : c.model_type == "qwen3"   ? "Qwen3"
                     : c.model_type == "mistral" ? "Mistral"
                                                 : "Llama";
  return fmt::format("a {} of {} layers", name, c.num_hidden_layers);
}

}  // namespace

NamedTensors read_llama_weights(const ModelFiles& files, const LlamaConfig& config) {
  auto found = read_model_tensors(files);
  std::erase_if(found, [](const auto& entry) { return entry.first.ends_with("rotary_emb.inv_freq"); });
  const auto where = files.weights.size() == 1 ? files.weights.front() : files.dir;
  NamedTensors out;
  for (const auto& spec : llama_specs(config)) {
    const auto it = found.find(hf_name(spec.name));
    if (it == found.end()) {
      throw RuntimeError(fmt::format("{}: no tensor {} ({} has one)", where, hf_name(spec.name),
                                     describe(config)));
    }
    const auto& [tensor, file] = it->second;
    if (tensor.sizes().vec() != spec.shape) {
      throw RuntimeError(fmt::format("{}: tensor {} has shape [{}], config.json's dimensions give [{}]",
                                     file, it->first, fmt::join(tensor.sizes(), ", "),
                                     fmt::join(spec.shape, ", ")));
    }
    if (!tensor.is_floating_point()) {
      throw RuntimeError(fmt::format("{}: tensor {} is {}, not floating point", file, it->first,
                                     c10::toString(tensor.scalar_type())));
    }
    out.emplace_back(spec.name, tensor.to(torch::kFloat32).contiguous());
    found.erase(it);
  }
  if (const auto head = found.find("lm_head.weight"); head != found.end() && config.tie_word_embeddings) {
    if (!torch::equal(head->second.first.to(torch::kFloat32), out.front().second)) {
      throw RuntimeError(fmt::format("{}: lm_head.weight differs from model.embed_tokens.weight, "
                                     "but config.json's tie_word_embeddings is true",
                                     head->second.second));
    }
    found.erase(head);
  }
  if (!found.empty()) {
    throw RuntimeError(fmt::format("{}: tensor {} is not part of {}", found.begin()->second.second,
                                   found.begin()->first, describe(config)));
  }
  return out;
}

NamedTensors to_llama_tensors(const NamedTensors& weights, const LlamaConfig& config) {
  std::map<std::string, torch::Tensor> by_name(weights.begin(), weights.end());
  NamedTensors out;
  for (const auto& spec : llama_specs(config)) {
    const auto it = by_name.find(spec.name);
    if (it == by_name.end()) throw RuntimeError(fmt::format("the checkpoint has no parameter {}", spec.name));
    if (it->second.sizes().vec() != spec.shape) {
      throw RuntimeError(fmt::format("parameter {} has shape [{}], {} of this config.json needs [{}]",
                                     spec.name, fmt::join(it->second.sizes(), ", "),
                                     describe(config), fmt::join(spec.shape, ", ")));
    }
    out.emplace_back(hf_name(spec.name), it->second.detach().to(torch::kCPU).contiguous());
  }
  return out;
}

}  // namespace ampt::hf

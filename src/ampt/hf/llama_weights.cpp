#include "ampt/hf/llama_weights.h"

#include "ampt/core/errors.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>

namespace ampt::hf {
namespace {

struct LlamaSpec {
  std::string name;  // ampt's
  std::vector<int64_t> shape;
};

std::string hf_name(const std::string& name) {
  return name.starts_with("lm_head.") ? name : "model." + name;
}

std::vector<LlamaSpec> llama_specs(const LlamaConfig& c) {
  const int64_t C = c.hidden_size, D = c.head_dim(), q = c.num_attention_heads * D,
                kv = c.num_key_value_heads * D, F = c.intermediate_size;
  std::vector<LlamaSpec> specs = {{"embed_tokens.weight", {c.vocab_size, C}}};
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

void read_llama_weights(const ModelFiles& files, const LlamaConfig& config,
                        const TensorSink& sink) {
  std::map<std::string, LlamaSpec> wanted;
  for (auto& spec : llama_specs(config)) wanted.emplace(hf_name(spec.name), std::move(spec));
  // A tied model's saved head is compared with the embedding once both are read; the embedding
  // is kept for that only where a head is there to compare (an index names it, or the one file
  // holds both).
  const bool tied = config.tie_word_embeddings;
  const bool head_saved = files.shard_of.empty() || files.shard_of.count("lm_head.weight") > 0;
  std::pair<torch::Tensor, std::string> embedding, head;
  for_each_model_tensor(files, [&](const std::string& name, const torch::Tensor& tensor,
                                   const std::string& file) {
    if (name.ends_with("rotary_emb.inv_freq")) return;
    if (tied && name == "lm_head.weight") {
      head = {tensor, file};
      return;
    }
    const auto it = wanted.find(name);
    if (it == wanted.end()) {
      throw RuntimeError(fmt::format("{}: tensor {} is not part of {}", file, name,
                                     describe(config)));
    }
    const auto& spec = it->second;
    if (tensor.sizes().vec() != spec.shape) {
      throw RuntimeError(fmt::format("{}: tensor {} has shape [{}], config.json's dimensions give [{}]",
                                     file, name, fmt::join(tensor.sizes(), ", "),
                                     fmt::join(spec.shape, ", ")));
    }
    if (!tensor.is_floating_point()) {
      throw RuntimeError(fmt::format("{}: tensor {} is {}, not floating point", file, name,
                                     c10::toString(tensor.scalar_type())));
    }
    if (tied && head_saved && spec.name == "embed_tokens.weight") embedding = {tensor, file};
    sink(spec.name, tensor);
    wanted.erase(it);
  });
  const auto where = files.weights.size() == 1 ? files.weights.front() : files.dir;
  for (const auto& spec : llama_specs(config)) {
    if (wanted.count(hf_name(spec.name)) > 0) {
      throw RuntimeError(fmt::format("{}: no tensor {} ({} has one)", where, hf_name(spec.name),
                                     describe(config)));
    }
  }
  if (head.first.defined() && !embedding.first.defined()) {
    throw RuntimeError(fmt::format("{}: holds lm_head.weight, which {} does not name",
                                   head.second, files.index));
  }
  if (head.first.defined() &&
      !torch::equal(head.first.to(torch::kFloat32), embedding.first.to(torch::kFloat32))) {
    throw RuntimeError(fmt::format("{}: lm_head.weight differs from model.embed_tokens.weight, "
                                   "but config.json's tie_word_embeddings is true",
                                   head.second));
  }
}

NamedTensors read_llama_weights(const ModelFiles& files, const LlamaConfig& config) {
  std::map<std::string, torch::Tensor> by_name;
  read_llama_weights(files, config, [&](const std::string& name, const torch::Tensor& tensor) {
    by_name[name] = tensor.to(torch::kFloat32).contiguous();
  });
  NamedTensors out;
  for (const auto& spec : llama_specs(config)) out.emplace_back(spec.name, by_name.at(spec.name));
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

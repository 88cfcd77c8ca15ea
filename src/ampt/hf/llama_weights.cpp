#include "ampt/hf/llama_weights.h"

#include "ampt/core/errors.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

namespace ampt::hf {
namespace {

// One of ampt's parameters and how Hugging Face's files hold it: as the tensor `hf` (or one of
// `aliases`), or, for experts, as `parts`: groups of per-expert tensors, each group stacked over
// the experts and the groups joined along dim 1 (gate and up into gate_up_proj [E, 2I, C]).
struct LlamaSpec {
  std::string name;  // ampt's
  std::vector<int64_t> shape;
  std::string hf;                    // the name written; empty where `parts` are written
  std::vector<std::string> aliases;  // further names it is read from
  std::vector<std::vector<std::string>> parts;
};

std::string hf_name(const std::string& name) {
  return name.starts_with("lm_head.") ? name : "model." + name;
}

// A sparse block's router and experts as ampt holds them (`linears` names them), read from the
// published per-expert tensors (Mixtral's under block_sparse_moe, w1/w3/w2) or from transformers
// 5's fused ones.
void add_expert_specs(const LlamaArchitecture& c, const std::string& block, const DeclaredLinears& linears,
                      std::vector<LlamaSpec>& specs) {
  const int64_t C = c.n_embd, E = c.moe.experts, I = c.moe.intermediate;
  const bool mixtral = c.flavour == "mixtral";
  const auto published = hf_name(block + (mixtral ? "block_sparse_moe." : "mlp."));
  const auto expert = [&](const char* qwen, const char* mixtral_name) {
    std::vector<std::string> names;
    for (int64_t e = 0; e < E; ++e) {
      names.push_back(fmt::format("{}experts.{}.{}.weight", published, e, mixtral ? mixtral_name : qwen));
    }
    return names;
  };
  const auto declared = [&](DeclaredLinear::Kind kind) {
    const auto it = std::ranges::find_if(linears, [&](const DeclaredLinear& l) {
      return l.kind == kind && l.name.starts_with(block);
    });
    if (it == linears.end()) throw std::logic_error("sparse block " + block + " without its declared layers");
    return it->name;
  };
  const auto fused = [&](const std::string& name, std::vector<int64_t> shape,
                         std::vector<std::vector<std::string>> parts) {
    specs.push_back({name, std::move(shape), "", {hf_name(name)}, std::move(parts)});
  };
  const auto router = declared(DeclaredLinear::Kind::router) + ".weight";
  specs.push_back({router, {E, C}, published + "gate.weight",
                   mixtral ? std::vector<std::string>{hf_name(router)} : std::vector<std::string>{}, {}});
  fused(declared(DeclaredLinear::Kind::experts_up), {E, 2 * I, C},
        {expert("gate_proj", "w1"), expert("up_proj", "w3")});
  fused(declared(DeclaredLinear::Kind::experts_down), {E, C, I}, {expert("down_proj", "w2")});
}

// The block Linears come from `linears`, in their order after each block's norms.
std::vector<LlamaSpec> llama_specs(const LlamaArchitecture& c, const DeclaredLinears& linears) {
  const int64_t C = c.n_embd, D = c.head_dim();
  std::vector<LlamaSpec> specs;
  const auto add = [&](std::string name, std::vector<int64_t> shape) {
    auto hf = hf_name(name);
    specs.push_back({std::move(name), std::move(shape), std::move(hf), {}, {}});
  };
  add("embed_tokens.weight", {c.vocab_size, C});
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const auto p = fmt::format("layers.{}.", i);
    add(p + "input_layernorm.weight", {C});
    add(p + "post_attention_layernorm.weight", {C});
    if (c.qk_norm) {
      add(p + "self_attn.q_norm.weight", {D});
      add(p + "self_attn.k_norm.weight", {D});
    }
    for (const auto& linear : linears) {
      if (linear.kind != DeclaredLinear::Kind::linear || !linear.name.starts_with(p)) continue;
      add(linear.name + ".weight", {linear.out, linear.in});
      if (linear.bias) add(linear.name + ".bias", {linear.out});
    }
    if (c.moe.sparse(i)) add_expert_specs(c, p, linears, specs);
  }
  add("norm.weight", {C});
  if (!c.tied_head) add("lm_head.weight", {c.vocab_size, C});
  return specs;
}

std::string describe(const LlamaArchitecture& c) {
  const auto* name = c.flavour == "qwen2"       ? "Qwen2"
                     : c.flavour == "qwen3"     ? "Qwen3"
                     : c.flavour == "mistral"   ? "Mistral"
                     : c.flavour == "qwen3_moe" ? "Qwen3-MoE"
                     : c.flavour == "mixtral"   ? "Mixtral"
                                                   : "Llama";
  const auto experts = c.moe.active() ? fmt::format(" and {} experts", c.moe.experts) : "";
  return fmt::format("a {} of {} layers{}", name, c.n_layer, experts);
}

// The checks every tensor read passes: its shape as config.json's dimensions give it, and
// floating point.
void check_tensor(const std::string& file, const std::string& name, const torch::Tensor& tensor,
                  const std::vector<int64_t>& shape) {
  if (tensor.sizes().vec() != shape) {
    throw RuntimeError(fmt::format("{}: tensor {} has shape [{}], config.json's dimensions give [{}]",
                                   file, name, fmt::join(tensor.sizes(), ", "),
                                   fmt::join(shape, ", ")));
  }
  if (!tensor.is_floating_point()) {
    throw RuntimeError(fmt::format("{}: tensor {} is {}, not floating point", file, name,
                                   c10::toString(tensor.scalar_type())));
  }
}

// An expert tensor's parts as they arrive: where each part name goes, and each spec's parts so
// far (a block's experts are held until the last one is read).
class ExpertParts {
 public:
  explicit ExpertParts(const std::vector<LlamaSpec>& specs) : specs_(specs) {
    for (size_t i = 0; i < specs.size(); ++i) {
      for (size_t g = 0; g < specs[i].parts.size(); ++g) {
        for (size_t e = 0; e < specs[i].parts[g].size(); ++e) where_[specs[i].parts[g][e]] = {i, g, e};
      }
    }
  }

  // The spec `name` is a part of, or nullptr.
  const LlamaSpec* owner(const std::string& name) const {
    const auto it = where_.find(name);
    return it == where_.end() ? nullptr : &specs_[it->second.spec];
  }

  // Holds part `name`; returns the whole tensor once its last part is in, else an undefined one.
  torch::Tensor add(const std::string& name, const torch::Tensor& tensor) {
    const auto [spec, group, member] = where_.at(name);
    const auto& parts = specs_[spec].parts;
    auto& held = held_[spec];
    if (held.empty()) {
      held.assign(parts.size(), std::vector<torch::Tensor>(parts.front().size()));
    }
    held[group][member] = tensor;
    where_.erase(name);
    for (const auto& g : held) {
      for (const auto& t : g) {
        if (!t.defined()) return {};
      }
    }
    std::vector<torch::Tensor> stacked;
    for (const auto& g : held) stacked.push_back(torch::stack(g));
    held_.erase(spec);
    return torch::cat(stacked, 1);
  }

  // The first part of `spec` not read, or "" when none was missing.
  std::string missing(const LlamaSpec& spec) const {
    for (const auto& group : spec.parts) {
      for (const auto& name : group) {
        if (where_.count(name) > 0) return name;
      }
    }
    return "";
  }

 private:
  struct Place {
    size_t spec, group, member;
  };
  const std::vector<LlamaSpec>& specs_;
  std::map<std::string, Place> where_;
  std::map<size_t, std::vector<std::vector<torch::Tensor>>> held_;
};

}  // namespace

void read_llama_weights(const ModelFiles& files, const LlamaArchitecture& config,
                        const DeclaredLinears& linears, const TensorSink& sink) {
  const auto specs = llama_specs(config, linears);
  std::map<std::string, const LlamaSpec*> wanted;
  for (const auto& spec : specs) {
    if (!spec.hf.empty()) wanted.emplace(spec.hf, &spec);
    for (const auto& alias : spec.aliases) wanted.emplace(alias, &spec);
  }
  std::set<std::string> done;
  ExpertParts parts(specs);
  // A tied model's saved head is compared with the embedding once both are read; the embedding
  // is kept for that only where a head is there to compare (an index names it, or the one file
  // holds both).
  const bool tied = config.tied_head;
  const bool head_saved = files.shard_of.empty() || files.shard_of.count("lm_head.weight") > 0;
  std::pair<torch::Tensor, std::string> embedding, head;
  const auto give = [&](const LlamaSpec& spec, const torch::Tensor& tensor) {
    sink(spec.name, tensor);
    done.insert(spec.name);
  };
  for_each_model_tensor(files, [&](const std::string& name, const torch::Tensor& tensor,
                                   const std::string& file) {
    if (name.ends_with("rotary_emb.inv_freq")) return;
    if (tied && name == "lm_head.weight") {
      head = {tensor, file};
      return;
    }
    if (const auto* spec = parts.owner(name); spec != nullptr && done.count(spec->name) == 0) {
      const auto groups = static_cast<int64_t>(spec->parts.size());
      check_tensor(file, name, tensor, {spec->shape[1] / groups, spec->shape[2]});
      if (const auto whole = parts.add(name, tensor); whole.defined()) give(*spec, whole);
      return;
    }
    const auto it = wanted.find(name);
    if (it == wanted.end() || done.count(it->second->name) > 0) {
      throw RuntimeError(fmt::format("{}: tensor {} is not part of {}{}", file, name,
                                     describe(config),
                                     it == wanted.end() ? "" : ", or comes twice"));
    }
    const auto& spec = *it->second;
    check_tensor(file, name, tensor, spec.shape);
    if (tied && head_saved && spec.name == "embed_tokens.weight") embedding = {tensor, file};
    give(spec, tensor);
  });
  const auto where = files.weights.size() == 1 ? files.weights.front() : files.dir;
  for (const auto& spec : specs) {
    if (done.count(spec.name) > 0) continue;
    const auto missing = spec.parts.empty() ? spec.hf : parts.missing(spec);
    throw RuntimeError(fmt::format("{}: no tensor {} ({} has one)", where, missing, describe(config)));
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

NamedTensors read_llama_weights(const ModelFiles& files, const LlamaArchitecture& config,
                                const DeclaredLinears& linears) {
  std::map<std::string, torch::Tensor> by_name;
  read_llama_weights(files, config, linears,
                     [&](const std::string& name, const torch::Tensor& tensor) {
                       by_name[name] = tensor.to(torch::kFloat32).contiguous();
                     });
  NamedTensors out;
  for (const auto& spec : llama_specs(config, linears)) out.emplace_back(spec.name, by_name.at(spec.name));
  return out;
}

NamedTensors to_llama_tensors(const NamedTensors& weights, const LlamaArchitecture& config,
                              const DeclaredLinears& linears) {
  std::map<std::string, torch::Tensor> by_name(weights.begin(), weights.end());
  NamedTensors out;
  for (const auto& spec : llama_specs(config, linears)) {
    const auto it = by_name.find(spec.name);
    if (it == by_name.end()) throw RuntimeError(fmt::format("the checkpoint has no parameter {}", spec.name));
    if (it->second.sizes().vec() != spec.shape) {
      throw RuntimeError(fmt::format("parameter {} has shape [{}], {} of this config.json needs [{}]",
                                     spec.name, fmt::join(it->second.sizes(), ", "),
                                     describe(config), fmt::join(spec.shape, ", ")));
    }
    const auto tensor = it->second.detach().to(torch::kCPU);
    if (spec.parts.empty()) {
      out.emplace_back(spec.hf, tensor.contiguous());
      continue;
    }
    // Expert by expert, as save_pretrained writes them: each group a slice along dim 1.
    const auto groups = static_cast<int64_t>(spec.parts.size());
    for (int64_t e = 0; e < spec.shape[0]; ++e) {
      const auto slices = tensor.select(0, e).chunk(groups, 0);
      for (int64_t g = 0; g < groups; ++g) out.emplace_back(spec.parts[g][e], slices[g].contiguous());
    }
  }
  return out;
}

}  // namespace ampt::hf

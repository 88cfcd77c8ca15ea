#include "ampt/hf/gpt2_weights.h"

#include "ampt/core/errors.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>

namespace ampt::hf {
namespace {

// One GPT-2 tensor: its name in ampt (its HF name is "transformer." + the same), its shape in
// ampt's layout, and whether HF stores it transposed (Conv1D).
struct Gpt2Spec {
  std::string name;
  std::vector<int64_t> shape;
  bool conv1d = false;
};

// The block Linears come from `linears` (all of them Conv1D in the files), after each block's
// norms.
std::vector<Gpt2Spec> gpt2_specs(const Gpt2Config& c, const DeclaredLinears& linears,
                                 int64_t vocab_rows) {
  const int64_t C = c.n_embd;
  std::vector<Gpt2Spec> specs = {{"wte.weight", {vocab_rows, C}}, {"wpe.weight", {c.n_positions, C}}};
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const auto p = fmt::format("h.{}.", i);
    for (const auto* norm : {"ln_1", "ln_2"}) {
      specs.push_back({p + norm + ".weight", {C}});
      specs.push_back({p + norm + ".bias", {C}});
    }
    for (const auto& linear : linears) {
      if (linear.kind != DeclaredLinear::Kind::linear) continue;
      if (!linear.name.starts_with(p)) continue;
      specs.push_back({linear.name + ".weight", {linear.out, linear.in}, true});
      if (linear.bias) specs.push_back({linear.name + ".bias", {linear.out}});
    }
  }
  specs.push_back({"ln_f.weight", {C}});
  specs.push_back({"ln_f.bias", {C}});
  return specs;
}

// Buffers HF saves with the weights that are not weights: the causal mask and its fill value.
bool is_mask_buffer(const std::string& name) {
  return name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias");
}

std::string without_prefix(const std::string& name) {
  return name.starts_with("transformer.") ? name.substr(12) : name;
}

}  // namespace

NamedTensors read_gpt2_weights(const ModelFiles& files, const Gpt2Config& config,
                               const DeclaredLinears& linears, int64_t padded_vocab) {
  // name (prefix dropped) -> (tensor, file it came from)
  std::map<std::string, std::pair<torch::Tensor, std::string>> found;
  for (auto& [name, entry] : read_model_tensors(files)) {
    if (!is_mask_buffer(name)) found[without_prefix(name)] = std::move(entry);
  }
  const auto& paths = files.weights;
  const auto where = paths.size() == 1 ? paths.front() : fmt::format("{}", fmt::join(paths, ", "));
  NamedTensors out;
  torch::Tensor wte;
  for (const auto& spec : gpt2_specs(config, linears, config.vocab_size)) {
    const auto it = found.find(spec.name);
    if (it == found.end()) {
      throw RuntimeError(fmt::format("{}: no tensor transformer.{} (a GPT-2 of {} layers has one)",
                                     where, spec.name, config.n_layer));
    }
    auto tensor = it->second.first;
    const auto& file = it->second.second;
    auto expected = spec.shape;
    if (spec.conv1d) std::swap(expected[0], expected[1]);
    if (tensor.sizes().vec() != expected) {
      throw RuntimeError(fmt::format("{}: tensor {} has shape [{}], config.json's dimensions give "
                                     "[{}]",
                                     file, it->first, fmt::join(tensor.sizes(), ", "),
                                     fmt::join(expected, ", ")));
    }
    if (!tensor.is_floating_point()) {
      throw RuntimeError(fmt::format("{}: tensor {} is {}, not floating point", file, it->first,
                                     c10::toString(tensor.scalar_type())));
    }
    tensor = tensor.to(torch::kFloat32);
    if (spec.conv1d) tensor = tensor.t().contiguous();
    if (spec.name == "wte.weight") {
      wte = tensor;
      tensor = torch::cat({tensor, torch::zeros({padded_vocab - config.vocab_size, config.n_embd})});
    }
    out.emplace_back(spec.name, std::move(tensor));
    found.erase(it);
  }
  if (const auto head = found.find("lm_head.weight"); head != found.end()) {
    if (!torch::equal(head->second.first.to(torch::kFloat32), wte)) {
      throw RuntimeError(fmt::format("{}: lm_head.weight differs from transformer.wte.weight; "
                                     "ampt's GPT ties its head to the token embedding and cannot "
                                     "load an untied one",
                                     head->second.second));
    }
    found.erase(head);
  }
  if (!found.empty()) {
    throw RuntimeError(fmt::format("{}: tensor {} is not part of a GPT-2 of {} layers",
                                   found.begin()->second.second, found.begin()->first,
                                   config.n_layer));
  }
  return out;
}

NamedTensors to_gpt2_tensors(const NamedTensors& weights, const Gpt2Config& config,
                             const DeclaredLinears& linears) {
  std::map<std::string, torch::Tensor> by_name(weights.begin(), weights.end());
  NamedTensors out;
  for (const auto& spec : gpt2_specs(config, linears, config.vocab_size)) {
    const auto it = by_name.find(spec.name);
    if (it == by_name.end()) {
      throw RuntimeError(fmt::format("the checkpoint has no parameter {}", spec.name));
    }
    auto tensor = it->second.detach().to(torch::kCPU);
    if (spec.name == "wte.weight") tensor = tensor.narrow(0, 0, std::min(tensor.size(0), config.vocab_size));
    if (tensor.sizes().vec() != spec.shape) {
      throw RuntimeError(fmt::format("parameter {} has shape [{}], a GPT-2 of this config.json needs "
                                     "[{}]",
                                     spec.name, fmt::join(tensor.sizes(), ", "),
                                     fmt::join(spec.shape, ", ")));
    }
    if (spec.conv1d) tensor = tensor.t();
    out.emplace_back("transformer." + spec.name, tensor.contiguous());
  }
  return out;
}

}  // namespace ampt::hf

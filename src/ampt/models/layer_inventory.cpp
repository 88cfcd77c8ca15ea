#include "ampt/models/layer_inventory.h"

#include <algorithm>
#include <iterator>
#include <stdexcept>
#include <string_view>

namespace ampt::models {

bool LinearLayer::reads_norm() const {
  switch (role) {
    case LinearRole::qkv:
    case LinearRole::q:
    case LinearRole::k:
    case LinearRole::v:
    case LinearRole::fc:
    case LinearRole::gate:
    case LinearRole::up:
    case LinearRole::router:
      return true;
    case LinearRole::o:
    case LinearRole::down:
      return false;
  }
  return false;
}

std::vector<LinearLayer> LayerInventory::block_linears() const {
  return blocks.empty() ? std::vector<LinearLayer>{} : linears_of(*this, blocks.front());
}

LinearCounts linear_counts(const std::vector<LinearLayer>& layers) {
  LinearCounts counts;
  for (const auto& l : layers) {
    counts.weights += l.in * l.out;
    if (l.bias) counts.biases += l.out;
  }
  return counts;
}

std::vector<precision::Fp8Candidate> fp8_candidates(const LayerInventory& inventory,
                                                    bool fused_head) {
  std::vector<precision::Fp8Candidate> out;
  for (const auto& layer : inventory.linears) {
    precision::Fp8Candidate candidate{layer.name, layer.in, layer.out, {}, -1, {}};
    const auto& block = layer.block;
    candidate.block = std::ranges::find(inventory.blocks, block) - inventory.blocks.begin();
    candidate.kind = every_block(layer);
    for (const auto& [first, second] : inventory.one_precision) {
      if (layer.role != first) continue;
      const auto partner = std::ranges::find_if(inventory.linears, [&](const LinearLayer& l) {
        return l.block == layer.block && l.role == second;
      });
      if (partner != inventory.linears.end()) candidate.paired = partner->name;
    }
    out.push_back(std::move(candidate));
  }
  if (fused_head && inventory.head_out % 16 == 0 && inventory.head_out > 0) {
    out.push_back({"head", inventory.head_in, inventory.head_out, {}, -1, {}});
  }
  return out;
}

std::vector<LinearLayer> linears_of(const LayerInventory& inventory, const std::string& block) {
  std::vector<LinearLayer> out;
  std::ranges::copy_if(inventory.linears, std::back_inserter(out),
                       [&](const LinearLayer& l) { return l.block == block; });
  return out;
}

const LinearLayer& layer_of(const std::vector<LinearLayer>& block, LinearRole role) {
  const auto it = std::ranges::find(block, role, &LinearLayer::role);
  if (it == block.end()) throw std::logic_error("a block built without the layer its inventory declares");
  return *it;
}

SparseLayers sparse_layers_of(const LayerInventory& inventory, const std::string& block) {
  SparseLayers out;
  for (const auto& router : inventory.routers) {
    if (router.block == block) out.router = router;
  }
  std::ranges::copy_if(inventory.expert_groups, std::back_inserter(out.expert_groups),
                       [&](const LinearLayer& l) { return l.block == block; });
  return out;
}

std::vector<std::string> module_path(const LinearLayer& layer) {
  std::vector<std::string> out;
  auto rest = std::string_view(layer.name).substr(layer.block.size() + 1);
  for (auto dot = rest.find('.'); dot != std::string_view::npos; dot = rest.find('.')) {
    out.emplace_back(rest.substr(0, dot));
    rest.remove_prefix(dot + 1);
  }
  out.emplace_back(rest);
  return out;
}

std::string every_block(const LinearLayer& layer) {
  // "h.3" and "h.3.mlp.c_fc" → "h.*.mlp.c_fc"
  const auto& block = layer.block;
  return block.substr(0, block.rfind('.') + 1) + "*" + layer.name.substr(block.size());
}

hf::DeclaredLinears declared_linears(const LayerInventory& inventory) {
  using Kind = hf::DeclaredLinear::Kind;
  hf::DeclaredLinears out;
  for (const auto& layer : inventory.linears) out.push_back({layer.name, layer.in, layer.out, layer.bias});
  for (const auto& router : inventory.routers) {
    out.push_back({router.name, router.in, router.out, false, Kind::router});
  }
  for (const auto& group : inventory.expert_groups) {
    out.push_back({group.name, group.in, group.out, false,
                   group.role == LinearRole::up ? Kind::experts_up : Kind::experts_down});
  }
  return out;
}

}  // namespace ampt::models

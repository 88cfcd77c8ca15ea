#include "ampt/precision/precision_islands.h"

#include "ampt/core/errors.h"
#include "ampt/core/glob.h"

#include <c10/core/impl/LocalDispatchKeySet.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/normalization.h>

namespace ampt::precision {
namespace {

thread_local const PrecisionIslands* current_islands = nullptr;

bool matches(const std::string& pattern, const std::string& name) {
  for (std::size_t start = 0;;) {
    if (glob_match(pattern, std::string_view(name).substr(start))) return true;
    const auto dot = name.find('.', start);
    if (dot == std::string::npos) return false;
    start = dot + 1;
  }
}

bool is_norm(const torch::nn::Module& module) {
  return module.as<torch::nn::BatchNorm1d>() || module.as<torch::nn::BatchNorm2d>() ||
         module.as<torch::nn::BatchNorm3d>() || module.as<torch::nn::LayerNorm>() ||
         module.as<torch::nn::GroupNorm>() || dynamic_cast<const NormRole*>(&module) != nullptr;
}

}  // namespace

void PrecisionIslands::add(const torch::nn::Module* module, Island island) {
  if (index_.count(module)) return;
  index_.emplace(module, ordered_.size());
  ordered_.push_back(std::move(island));
}

const Island* PrecisionIslands::find(const torch::nn::Module* module) const {
  const auto it = index_.find(module);
  return it == index_.end() ? nullptr : &ordered_[it->second];
}

bool PrecisionIslands::owns_parameter(const std::string& name) const {
  return std::ranges::any_of(ordered_, [&](const Island& island) {
    return name.size() > island.name.size() && name.starts_with(island.name) &&
           name[island.name.size()] == '.';
  });
}

PrecisionIslands select_islands(const torch::nn::Module& root,
                                const std::vector<std::string>& patterns, bool norms) {
  PrecisionIslands islands;
  const auto modules = root.named_modules("", /*include_self=*/false);
  std::vector<bool> used(patterns.size(), false);
  for (const auto& item : modules) {
    const std::string& name = item.key();
    const auto* module = item.value().get();
    for (std::size_t p = 0; p < patterns.size(); ++p) {
      if (!matches(patterns[p], name)) continue;
      used[p] = true;
      islands.add(module, {name, IslandKind::pattern,
                           fmt::format("keep_fp32_modules pattern '{}'", patterns[p])});
    }
    if (norms && is_norm(*module)) islands.add(module, {name, IslandKind::norm, "norm layer"});
  }
  for (std::size_t p = 0; p < patterns.size(); ++p) {
    if (used[p]) continue;
    std::vector<std::string> names;
    for (const auto& item : modules) {
      if (names.size() == 12) {
        names.push_back("...");
        break;
      }
      names.push_back(item.key());
    }
    throw UsageError(fmt::format("keep_fp32_modules pattern '{}' matches no module of this model; "
                                 "its modules are {}",
                                 patterns[p], fmt::join(names, ", ")));
  }
  return islands;
}

IslandScope::IslandScope(const PrecisionIslands* islands) : previous_(current_islands) {
  current_islands = islands;
}

IslandScope::~IslandScope() { current_islands = previous_; }

const PrecisionIslands* active_islands() { return current_islands; }

torch::Tensor through_island(const torch::nn::Module& module, const torch::Tensor& x,
                             const std::function<torch::Tensor(const torch::Tensor&)>& forward) {
  const Island* island = current_islands ? current_islands->find(&module) : nullptr;
  if (island == nullptr) return forward(x);
  // Excluding the autocast keys is what `torch.autocast(enabled=False)` does for one region.
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
  // A norm with fp32 weights takes half input as it is: ATen's mixed-dtype norm kernels (CPU
  // and CUDA) compute the statistics in fp32 and return the input's dtype, so no fp32 copy of
  // the activations is made or kept for backward (Apex's keep_batchnorm_fp32 relies on the same).
  if (island->kind == IslandKind::norm || !x.is_floating_point()) return forward(x);
  return forward(x.to(torch::kFloat));
}

torch::Tensor call_sequence(torch::nn::Sequential sequence, torch::Tensor x) {
  for (auto& child : *sequence) {
    x = through_island(*child.ptr(), x, [&](const torch::Tensor& in) { return child.forward(in); });
  }
  return x;
}

}  // namespace ampt::precision

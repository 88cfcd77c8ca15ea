// fp32 islands: modules whose forward runs in fp32 (autocast off, fp32 weights) whatever
// precision the rest of the model runs in. Models call their submodules through
// `call`, which routes a module that the active IslandScope lists through that fp32 path.
#pragma once

#include "ampt/kernels/fused_linear.h"

#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/types.h>

#include <functional>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

namespace ampt::precision {

// The role of a normalization layer, for a model's own norm modules (an RMSNorm): a module that
// derives from it is a norm to select_islands, as torch's BatchNorm, LayerNorm and GroupNorm
// are, so that O2 keeps it an fp32 island whatever its type.
class NormRole {
 public:
  virtual ~NormRole() = default;
};

// Why a module is an island; also what its output becomes.
enum class IslandKind {
  norm,     // a norm layer under O2: fp32 weights and statistics on the half activations as
            // they come, output in their dtype
  pattern,  // matched by keep_fp32_modules: floating inputs cast to fp32, output fp32
};

struct Island {
  std::string name;     // the module's dotted name, e.g. "h.0.ln_1"
  IslandKind kind = IslandKind::norm;
  std::string reason;   // "norm layer" or "keep_fp32_modules pattern 'ln_*'"
};

// The islands of one model, keyed by module; built by select_islands.
class PrecisionIslands {
 public:
  void add(const torch::nn::Module* module, Island island);
  const Island* find(const torch::nn::Module* module) const;
  // In module-tree order.
  const std::vector<Island>& list() const { return ordered_; }
  // Whether the parameter named `name` ("h.0.ln_1.weight") belongs to an island.
  bool owns_parameter(const std::string& name) const;

 private:
  std::unordered_map<const torch::nn::Module*, std::size_t> index_;
  std::vector<Island> ordered_;
};

// Walks `root`'s module tree: every module matched by one of `patterns` (a glob matched against
// the full dotted name or any dotted suffix of it, so "ln_*" matches "h.0.ln_1") is a pattern
// island; with `norms`, every norm by role (BatchNorm, LayerNorm, GroupNorm, and any NormRole)
// is a norm island. Throws
// UsageError when a pattern matches no module, listing some of the model's module names.
PrecisionIslands select_islands(const torch::nn::Module& root,
                                const std::vector<std::string>& patterns, bool norms);

// While alive, `call` on this thread consults `islands` (nullptr: none).
class IslandScope {
 public:
  explicit IslandScope(const PrecisionIslands* islands);
  ~IslandScope();
  IslandScope(const IslandScope&) = delete;
  IslandScope& operator=(const IslandScope&) = delete;

 private:
  const PrecisionIslands* previous_;
};

// The islands `call` consults on this thread now (nullptr: none).
const PrecisionIslands* active_islands();

// forward(x), or its fp32-island version when the active scope lists `module`.
torch::Tensor through_island(const torch::nn::Module& module, const torch::Tensor& x,
                             const std::function<torch::Tensor(const torch::Tensor&)>& forward);

// `holder->forward(x)` through the island check: what the models use for every submodule.
// A Linear runs as at::linear (one addmm with the bias fused in, one AddmmBackward), or over its
// half copies where it has them (kernels::linear): LibTorch's LinearImpl::forward does a matmul
// and then a separate in-place bias add for inputs of 3 or more dimensions, which under autocast
// adds an fp32 bias into the half output and doubles the autograd nodes.
template <class Holder>
torch::Tensor call(Holder&& holder, const torch::Tensor& x) {
  auto& module = *holder;
  if constexpr (std::is_same_v<std::remove_cvref_t<decltype(module)>, torch::nn::LinearImpl>) {
    return through_island(module, x, [&](const torch::Tensor& in) {
      return kernels::linear(in, module.weight, module.bias);
    });
  } else {
    return through_island(module, x, [&](const torch::Tensor& in) { return module.forward(in); });
  }
}

// A Sequential's children one after the other, each through the island check.
torch::Tensor call_sequence(torch::nn::Sequential sequence, torch::Tensor x);

}  // namespace ampt::precision

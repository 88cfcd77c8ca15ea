#include "ampt/models/block_hooks.h"

namespace ampt::models {

BlockOutputs run_block(BlockHooks* hooks, std::size_t index, const BlockFn& fn,
                        const torch::Tensor& x, torch::TensorList params, bool checkpointed,
                        bool preserve_rng) {
  if (hooks == nullptr) return checkpointed ? checkpoint(fn, x, params, preserve_rng) : fn(x);
  const BlockFn hooked = [hooks, index, fn](const torch::Tensor& input) {
    hooks->before_forward(index);
    return fn(input);
  };
  auto y = checkpointed ? checkpoint(hooked, x, params, preserve_rng) : hooked(x);
  y.front() = hooks->after_forward(index, y.front());
  return y;
}

}  // namespace ampt::models

// The per-block hooks of the layer-execution seam: a transformer runs each of its blocks through
// run_block, so that code outside the model (ZeRO-3's gather and release of a block's
// parameters) acts before a block computes and after its forward, and can reach its backward
// through the output, while the model knows nothing of what the hooks do.
#pragma once

#include "ampt/models/activation_checkpoint.h"

#include <torch/types.h>

#include <cstddef>

namespace ampt::models {

class BlockHooks {
 public:
  virtual ~BlockHooks() = default;
  // Before block `index` computes: its forward, and under activation checkpointing also its
  // recomputation in backward (models::recomputing() tells them apart).
  virtual void before_forward(std::size_t index) = 0;
  // After block `index`'s forward (not after a recomputation), with its output; returns what
  // the model goes on with (the output, or a tensor through which backward reaches the block).
  virtual torch::Tensor after_forward(std::size_t index, const torch::Tensor& output) = 0;
};

// Block `index`'s forward fn(x) through `hooks` (nullptr: none), recomputed in backward when
// `checkpointed` (activation_checkpoint.h, with `params` and `preserve_rng`); the recomputation
// runs before_forward again. after_forward sees the block's output, the first of its outputs.
BlockOutputs run_block(BlockHooks* hooks, std::size_t index, const BlockFn& fn,
                        const torch::Tensor& x, torch::TensorList params, bool checkpointed,
                        bool preserve_rng);

}  // namespace ampt::models

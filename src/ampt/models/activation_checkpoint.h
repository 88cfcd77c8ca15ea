// Activation checkpointing: run a block without keeping its activations, recompute it in backward.
#pragma once

#include <torch/types.h>

#include <functional>
#include <vector>

namespace ampt::models {

// What a block returns: its output first, then what it reports beside it (a sparse block's
// router logits), each differentiable, so that a loss on them reaches the block's weights.
using BlockOutputs = std::vector<torch::Tensor>;
using BlockFn = std::function<BlockOutputs(const torch::Tensor&)>;

// fn(x), computed without recording the graph inside fn; only x is kept for backward. In
// backward, fn runs again on x with the autocast state (CPU and CUDA: enabled, dtype, cache)
// that the forward saw and, when `preserve_rng`, the CPU (and x's CUDA) generator state it
// started from, so dropout draws the same masks; the generators are put back afterwards.
// `params` are the parameters fn reads: their gradients flow through this node.
// Outside grad mode this is fn(x) itself.
BlockOutputs checkpoint(const BlockFn& fn, const torch::Tensor& x, torch::TensorList params,
                        bool preserve_rng);

// True on the thread that is recomputing a checkpointed block, so that stateful layers
// (fp8 amax histories) do not record the same step twice.
bool recomputing();

}  // namespace ampt::models

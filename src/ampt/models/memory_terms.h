// The pieces families count their activations with (FamilyTerms::activations, memory_estimate.h):
// what a scheme saves per element, the loss's transient, and what LoRA's adapters add.
#pragma once

#include "ampt/models/model_dims.h"

#include <cstdint>
#include <vector>

namespace ampt::models {

// Bytes per element of what a scheme saves for backward: `residual` for the residual stream and
// the norms' inputs (fp32 under O0/O1, where autocast leaves adds and norms in fp32; half under
// O2), `matmul` for what the matmuls and convolutions produce and consume.
struct Widths {
  int64_t residual, matmul;
};
Widths widths(const Scheme& s);

// Cross-entropy's peak at the start of backward, per logit: the fp32 log-probabilities saved by
// log_softmax, the gradient arriving from nll_loss, and the gradient log_softmax produces.
constexpr int64_t kLossBytesPerLogit = 12;

int64_t product(const std::vector<int64_t>& shape);

// A transformer's head and loss at the start of backward, for `tokens` rows of width C over V
// classes. Plain: the final norm's input and output, then per logit the fp32 log-probabilities
// saved by log_softmax and two gradients of that size. Fused (kernels/fused_classifier.h): the
// final norm's input, the fp32 gradients of the hidden states and of the head's weight that the
// forward computed (none for a frozen LoRA base's weight), and their scaled copies that backward
// hands on (the hidden states' in the matmul dtype, the weight's in fp32); the forward's one
// chunk of fp32 logits at a time (about 2^26).
int64_t head_bytes(const ModelDims& d, const Scheme& s, int64_t tokens, int64_t C, int64_t V);

// How LoRA changes what a transformer's blocks save, against a full fine-tune's count: per
// adapted layer the r-wide intermediate B reads, and A's own copy of the input where it is not a
// tensor already saved: after dropout (with dropout's 1-byte mask), or under O1 the half cast of
// a norm's fp32 output that the layer makes for its base's GEMM and its adapter's. Families whose
// frozen Linear layers are plain at::linear (`plain_frozen`), whose autograd keeps an input only
// for the weight's gradient, lose `frozen_inputs` bytes per token and block that a full
// fine-tune's count holds (the inputs only weight gradients read), and an adapter keeps the
// input it reads (one tensor for the layers that read the same one); ampt's own autograd
// functions (a GPT's) keep their inputs frozen or not. Over all blocks, or one block's when
// checkpointing recomputes one block at a time.
int64_t lora_activations(const ModelDims& d, const Scheme& s, int64_t tokens, bool checkpointed,
                         bool plain_frozen, int64_t frozen_inputs);

}  // namespace ampt::models

// The classifier head and its loss as one operation: logits = hidden · weightᵀ and the mean
// cross-entropy against the targets, worked through the rows in chunks so that the [rows, vocab]
// logits and their gradient are never held whole (llm.c's fused_classifier, Liger-Kernel's fused
// linear cross-entropy). Gradients are computed during the forward pass, chunk by chunk, and
// scaled by the incoming gradient in backward.
#pragma once

#include "ampt/kernels/target_check.h"

#include <torch/types.h>

#include <cstdint>

namespace ampt::kernels {

// The rows per chunk when ClassifierLossOptions::chunk_rows is 0: about 2^26 logits a chunk, and
// at least 64 rows (what the memory estimate counts for the chunk, too).
int64_t default_chunk_rows(int64_t classes);

struct ClassifierLossOptions {
  // Columns (vocabulary rows of `weight`) that take part in the softmax; the rest are padding
  // (a vocabulary rounded up for tensor cores): they never enter the softmax and get no gradient.
  // 0: all of them.
  int64_t valid_classes = 0;
  // Rows per chunk; 0: default_chunk_rows(classes).
  int64_t chunk_rows = 0;
  // The three matmuls in fp8 (fp8_quantize.h, fp8_gemm.h): the weight and each chunk of hidden
  // rows in e4m3, each chunk's logit gradient in e5m2, each tensor scaled from its own amax
  // (current scaling: a chunk has no history), logits in bfloat16, gradients accumulated in
  // float32. Rows per chunk round down to a multiple of 16; rows, width and classes must be
  // multiples of 16 on a GPU.
  bool fp8 = false;
};

// hidden [..., width] (rows: all but the last dimension), weight [classes, width], targets of
// the rows' shape [...] int64 (kIgnoreIndex: the row does not count) → the mean loss over the
// counted rows, a 0-dim float32 tensor. The matmuls run in autocast's dtype when autocast is on
// for the device (else the weight's dtype), or in fp8 (options.fp8); the softmax in float32. On
// CUDA the softmax, loss and gradient of a chunk are one kernel (cuda/launch.h); elsewhere ATen
// ops. Gradients flow to hidden and weight.
torch::Tensor classifier_loss(const torch::Tensor& hidden, const torch::Tensor& weight,
                              const torch::Tensor& targets, const ClassifierLossOptions& options);

// The unfused computation the fused one must agree with: cross_entropy over the logits of the
// valid columns, with autograd's own backward.
torch::Tensor classifier_loss_reference(const torch::Tensor& hidden, const torch::Tensor& weight,
                                        const torch::Tensor& targets, int64_t valid_classes);

}  // namespace ampt::kernels

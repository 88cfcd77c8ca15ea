// Each row's log-probability of its target under the softmax of its logits, in float32, worked
// through the rows in chunks so that the [rows, vocab] logits are never held whole in float32,
// with its own backward that recomputes each chunk's softmax (what a preference loss needs of
// every sequence's answer tokens; Liger-Kernel's fused log-prob gather, without the head).
#pragma once

#include <torch/types.h>

#include <cstdint>

namespace ampt::kernels {

// logits [rows, vocab] (any floating dtype), targets [rows] int64 (kIgnoreIndex: the row counts
// 0) → [rows] float32 log-probabilities, logits[t] - logsumexp(logits), with gradients to
// logits in their dtype. `chunk_rows`: rows per chunk, 0 for default_chunk_rows (fused_classifier.h).
torch::Tensor token_log_probs(const torch::Tensor& logits, const torch::Tensor& targets,
                              int64_t chunk_rows = 0);

}  // namespace ampt::kernels

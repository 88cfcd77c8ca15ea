// Each row's log-probability of its target under the softmax of its logits, in float32, worked
// through the rows in chunks so that the [rows, vocab] logits are never held whole in float32,
// with its own backward that recomputes each chunk's softmax (what a preference loss needs of
// every sequence's answer tokens; Liger-Kernel's fused log-prob gather, without the head).
#pragma once

#include <torch/types.h>

#include <cstdint>

namespace ampt::kernels {

// logits [rows, vocab] (any floating dtype), targets [rows] int64 (kIgnoreIndex: the row counts
// 0) → [rows] float32 log-probabilities of softmax(logits / temperature), x[t] - logsumexp(x)
// with x the logits in float32 divided by `temperature`, with gradients to logits in their dtype.
// `chunk_rows`: rows per chunk, 0 for default_chunk_rows (fused_classifier.h). In exact mode
// (batch_invariant.h) each row's logsumexp is invariant_logsumexp's: a row's log-probability is
// then the same bits whatever the other rows and the chunking, the sampler's as the trainer's.
torch::Tensor token_log_probs(const torch::Tensor& logits, const torch::Tensor& targets,
                              int64_t chunk_rows = 0, double temperature = 1.0);

// token_log_probs with each row's entropy of the same softmax, -sum p·log p [rows] float32
// without gradient (GRPO's `entropy` figure), from the same pass over each chunk.
struct LogProbsAndEntropies {
  torch::Tensor log_probs;
  torch::Tensor entropies;
};
LogProbsAndEntropies token_log_probs_and_entropies(const torch::Tensor& logits,
                                                   const torch::Tensor& targets,
                                                   int64_t chunk_rows = 0,
                                                   double temperature = 1.0);

}  // namespace ampt::kernels

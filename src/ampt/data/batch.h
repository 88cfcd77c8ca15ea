// One training batch as the model consumes it.
#pragma once

#include <torch/types.h>

namespace ampt::data {

struct Batch {
  torch::Tensor inputs;
  torch::Tensor targets;
  // Packed sequences (--packing of instruction data, --document_mask): [B, T] int64, each
  // example's positions counting from 0, so that a token attends only to earlier tokens of its
  // own example (a new example starts wherever the position is 0). Undefined: each row is one
  // sequence at positions 0..T-1.
  torch::Tensor positions;
  // With positions: the same cut as cumulative lengths, int32 [runs + 1]: where each run of
  // positions starts in the flattened [B·T] batch, then B·T (FlashAttention's cu_seqlens).
  // Counted where the batch is made, so that its size is known without asking the device.
  torch::Tensor starts;
  // Packed preference pairs (preference_pairs.h): [pairs, 2] int64, the runs of positions (in
  // the order of `starts`) that hold each pair's chosen and rejected sequence. Undefined
  // otherwise; padded pairs are rows, the chosen half first.
  torch::Tensor pair_runs;
  // Preference pairs: [pairs] int64, each pair's index among all the data's pairs (train and
  // validation), in the batch's order of pairs.
  torch::Tensor pair_ids;
  // GRPO's completions (train/rollout.h), each [rows, T] as the targets unless said: each row's
  // advantage [rows]; 1 on the completion tokens the loss counts; the sampler's log-probability of
  // each target. Then what the GRPO objective fills in on the batch's first step, which later
  // steps on it (num_iterations) read: the trainer's own log-probabilities then (the old policy's),
  // the reference's (beta > 0), the sampler-trainer mismatch figures [3], and under --sampler fast
  // the importance weights that correct it with TRL's figures of them [5]. Undefined otherwise.
  torch::Tensor advantages;
  torch::Tensor completion_mask;
  torch::Tensor sampler_log_probs;
  torch::Tensor old_log_probs;
  torch::Tensor ref_log_probs;
  torch::Tensor mismatch;
  torch::Tensor sampler_weights;
  torch::Tensor sampler_figures;
  // The positions whose logits an objective reads, [N] int64 indices into the flattened [B·T]
  // (GRPO's completion tokens): the model's logits are then [N, vocab] of those alone, the head
  // never run on the prompt and the padding (TRL's logits_to_keep). Undefined: every position.
  // Counted where the batch is made, on the host, so that no device sync finds them.
  torch::Tensor logit_rows;
};

// The cumulative lengths of `positions` [B, T] on the host (Batch::starts).
torch::Tensor sequence_starts(const torch::Tensor& positions);

}  // namespace ampt::data

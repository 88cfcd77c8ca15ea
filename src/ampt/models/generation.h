// Text continuation with a language model (a family with `generation`): a batch of prompts of
// different lengths, left-padded, once through the model into a KV cache allocated for the
// prompts and the tokens to come, then one token per row at a time, each picked greedily or
// sampled (temperature, top-k, top-p) with random numbers keyed by (seed, step, prompt, sample),
// so that a row draws the same tokens whatever else is in the batch and on whichever device.
#pragma once

#include "ampt/models/kv_cache.h"

#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <vector>

namespace ampt::models {

struct SamplingOptions {
  int64_t max_new_tokens = 100;
  double temperature = 1.0;  // 0: greedy (argmax)
  int64_t top_k = 50;        // sample among the k most likely; 0: all
  double top_p = 1.0;        // then among the fewest whose probabilities reach p; 1: all
  uint64_t seed = 1337;
  int64_t step = 0;          // what the draws are keyed by besides the seed (a training step)
  // A sequence ends after producing any of these (its last token); none: at max_new_tokens.
  std::vector<int64_t> stop_tokens;
  // Tokens between the reads of whether every row has stopped (the host waits for the device
  // there); 0: 1 on the CPU, where the read costs nothing, 16 elsewhere.
  int64_t check_every = 0;
};

// The key of one row's random draws: a hash of the seed, the step, the prompt's index and the
// sample's index among the prompt's samples.
uint64_t draw_key(uint64_t seed, int64_t step, int64_t prompt, int64_t sample);

// One row to sample: its prompt (token ids, at least one) and what its draws are keyed by.
struct SampleRow {
  std::vector<int64_t> prompt;
  int64_t prompt_index = 0;
  int64_t sample_index = 0;
};

// The uniform numbers in [0, 1) [rows, count] float64 on the CPU that sampling draws with: row
// r's from its own generator, seeded with draw_key(seed, step, its prompt, its sample); its t-th
// number picks its t-th token.
torch::Tensor keyed_uniforms(const std::vector<SampleRow>& rows, uint64_t seed, int64_t step,
                             int64_t count);

// The next token [B] int64 of each row's logits [B, vocab] (any float dtype and device): the
// first argmax when temperature is 0, else the inverse CDF at `uniforms` [B] (in [0, 1), on the
// logits' device) of softmax(logits / temperature) restricted by top_k and top_p (HF's
// TopKLogitsWarper then TopPLogitsWarper), the tokens ordered most likely first and ties by id
// under top_p, in id order otherwise.
torch::Tensor pick_tokens(const torch::Tensor& logits, const torch::Tensor& uniforms,
                          const SamplingOptions& options);

// What generation decodes with: the logits [B, vocab] of the position after `tokens` [B, T_new],
// which follow the cache's positions (a model's next_logits under the precision it computes in:
// train::Policy::next_logits, as training computes them), the positions the model's context
// holds and the device its tokens go to.
struct Decoding {
  std::function<torch::Tensor(const torch::Tensor& tokens, KvCache& cache)> next_logits;
  int64_t context = 0;
  torch::Device device = torch::kCPU;
};

// One row's sampled continuation: its tokens, the stop token that ended it included, and each
// one's log-probability log_softmax(logits / temperature) (at temperature 0, of the logits) in
// float32, over the whole vocabulary: what TRL's GRPO computes for old_per_token_logps, not
// renormalised to top-k / top-p.
struct Completion {
  std::vector<int64_t> tokens;
  std::vector<float> logprobs;
  bool truncated = false;  // max_new_tokens reached without a stop token
};

// Continues every row's prompt without gradients (the model in the mode it is in: eval for
// generation) as if it were alone: each row its own positions from 0 and its own draws. A row
// that has stopped is fed padding until every row has (or max_new_tokens), and its outputs are
// dropped. `on_token(row, token)` sees each row's new tokens in order at each check (check_every).
// Throws RuntimeError (one line) for an empty batch or prompt, an option out of its range, and
// when the longest prompt plus max_new_tokens would pass the context.
std::vector<Completion> sample(const Decoding& model, const std::vector<SampleRow>& rows,
                               const SamplingOptions& options,
                               const std::function<void(size_t row, int64_t token)>& on_token = {});

// One prompt continued by sample() (keyed at prompt and sample 0), checked after every token:
// the new ids without the stop token, `on_token` called with each as it is produced.
std::vector<int64_t> generate(const Decoding& model, const std::vector<int64_t>& prompt,
                              const SamplingOptions& options,
                              const std::function<void(int64_t)>& on_token = {});

}  // namespace ampt::models

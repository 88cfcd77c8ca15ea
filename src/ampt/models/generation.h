// Text continuation with a language model (a family with `generation`): the prompt once through the model into a KV cache, then one token
// at a time, each picked greedily or sampled (temperature, top-k, top-p) from its logits.
#pragma once

#include "ampt/models/kv_cache.h"

#include <ATen/core/Generator.h>
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
  int64_t stop_token = -1;   // generation ends after producing it (not included); -1: never
};

// The next token from one position's logits [vocab] (float32 on any device): the first argmax
// when temperature is 0, else a draw from softmax(logits / temperature) restricted by top_k and
// top_p (HF's TopKLogitsWarper and TopPLogitsWarper), with `generator` (CPU).
int64_t pick_token(const torch::Tensor& logits, const SamplingOptions& options,
                   at::Generator& generator);

// What generate decodes with: the logits [B, vocab] of the position after `tokens` [B, T_new],
// which follow the cache's positions (a model's next_logits under the precision it computes in:
// train::Policy::next_logits, as training computes them), the positions the model's context
// holds and the device its tokens go to.
struct Decoding {
  std::function<torch::Tensor(const torch::Tensor& tokens, KvCache& cache)> next_logits;
  int64_t context = 0;
  torch::Device device = torch::kCPU;
};

// Continues `prompt` (token ids, at least one) without gradients (the model in the mode it is
// in: eval for generation), calling `on_token` with each new id as it is produced; returns the
// new ids. Throws RuntimeError when the prompt plus max_new_tokens would pass the context.
std::vector<int64_t> generate(const Decoding& model, const std::vector<int64_t>& prompt,
                              const SamplingOptions& options,
                              const std::function<void(int64_t)>& on_token = {});

}  // namespace ampt::models

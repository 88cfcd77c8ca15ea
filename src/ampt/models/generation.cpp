#include "ampt/models/generation.h"

#include "ampt/core/errors.h"

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>

#include <limits>

namespace ampt::models {

int64_t pick_token(const torch::Tensor& logits, const SamplingOptions& options,
                   at::Generator& generator) {
  auto scores = logits.to(torch::kCPU, torch::kFloat32);
  if (options.temperature <= 0.0) return scores.argmax().item<int64_t>();
  scores = scores / options.temperature;
  const double minus_inf = -std::numeric_limits<double>::infinity();
  if (options.top_k > 0 && options.top_k < scores.size(0)) {
    const auto kth = std::get<0>(scores.topk(options.top_k)).select(0, options.top_k - 1);
    scores = scores.masked_fill(scores < kth, minus_inf);
  }
  if (options.top_p < 1.0) {
    const auto [sorted, order] = scores.sort(/*dim=*/0, /*descending=*/true);
    const auto probabilities = sorted.softmax(0);
    // Drop a token when the ones ranked above it already reach top_p; the first always stays.
    const auto drop = (probabilities.cumsum(0) - probabilities) >= options.top_p;
    scores = scores.index_put({order.masked_select(drop)}, torch::tensor(minus_inf));
  }
  return torch::multinomial(scores.softmax(0), 1, /*replacement=*/false, generator).item<int64_t>();
}

std::vector<int64_t> generate(const Decoding& model, const std::vector<int64_t>& prompt,
                              const SamplingOptions& options,
                              const std::function<void(int64_t)>& on_token) {
  if (prompt.empty()) throw RuntimeError("generate: the prompt has no tokens");
  const int64_t end = static_cast<int64_t>(prompt.size()) + options.max_new_tokens;
  if (end > model.context) {
    throw RuntimeError(fmt::format("the prompt's {} tokens and max_new_tokens {} exceed the "
                                   "model's context of {} positions",
                                   prompt.size(), options.max_new_tokens, model.context));
  }
  torch::NoGradGuard no_grad;
  const auto device = model.device;
  auto generator = at::make_generator<at::CPUGeneratorImpl>(options.seed);
  KvCache cache;
  auto input = torch::tensor(prompt, torch::kInt64).unsqueeze(0).to(device);
  std::vector<int64_t> produced;
  for (int64_t i = 0; i < options.max_new_tokens; ++i) {
    const auto token = pick_token(model.next_logits(input, cache).squeeze(0), options, generator);
    if (token == options.stop_token) break;
    produced.push_back(token);
    if (on_token) on_token(token);
    input = torch::full({1, 1}, token, torch::dtype(torch::kInt64).device(device));
  }
  return produced;
}

}  // namespace ampt::models

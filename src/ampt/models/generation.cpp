#include "ampt/models/generation.h"

#include "ampt/core/errors.h"
#include "ampt/kernels/token_log_probs.h"

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <tuple>

namespace ampt::models {
namespace {

// SplitMix64's finaliser: every input bit moves every output bit.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30U)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27U)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31U);
}

// One line for each setting out of its range.
void check_options(const SamplingOptions& options) {
  const auto refuse = [](const char* name, auto value, const char* allowed) {
    throw RuntimeError(
        fmt::format("sample: {} {} is out of range: expected {}", name, value, allowed));
  };
  if (options.max_new_tokens < 1) refuse("max_new_tokens", options.max_new_tokens, "at least 1");
  if (!(options.temperature >= 0.0)) refuse("temperature", options.temperature, "a number >= 0");
  if (options.top_k < 0) refuse("top_k", options.top_k, "0 (all) or more");
  if (!(options.top_p > 0.0 && options.top_p <= 1.0)) {
    refuse("top_p", options.top_p, "0 < top_p <= 1");
  }
  if (options.check_every < 0) refuse("check_every", options.check_every, "0 (auto) or more");
}

}  // namespace

uint64_t draw_key(uint64_t seed, int64_t step, int64_t prompt, int64_t sample) {
  // Chained, so that the fields' order counts: (prompt 1, sample 2) is not (prompt 2, sample 1).
  uint64_t key = mix(seed);
  for (const int64_t part : {step, prompt, sample}) key = mix(key ^ static_cast<uint64_t>(part));
  return key;
}

torch::Tensor keyed_uniforms(const std::vector<SampleRow>& rows, uint64_t seed, int64_t step,
                             int64_t count) {
  auto uniforms = torch::empty({static_cast<int64_t>(rows.size()), count}, torch::kFloat64);
  for (size_t r = 0; r < rows.size(); ++r) {
    auto generator = at::make_generator<at::CPUGeneratorImpl>(
        draw_key(seed, step, rows[r].prompt_index, rows[r].sample_index));
    uniforms.select(0, static_cast<int64_t>(r)).uniform_(0.0, 1.0, generator);
  }
  return uniforms;
}

torch::Tensor pick_tokens(const torch::Tensor& logits, const torch::Tensor& uniforms,
                          const SamplingOptions& options) {
  auto scores = logits.to(torch::kFloat32);
  if (options.temperature <= 0.0) return scores.argmax(-1);
  // x / 1 is x: no pass over the vocabulary for it.
  if (options.temperature != 1.0) scores = scores / options.temperature;
  const double minus_inf = -std::numeric_limits<double>::infinity();
  const int64_t vocab = scores.size(-1);
  if (options.top_k > 0 && options.top_k < vocab) {
    const auto kth = std::get<0>(scores.topk(options.top_k, -1)).narrow(-1, options.top_k - 1, 1);
    scores = scores.masked_fill(scores < kth, minus_inf);
  }
  // Top-p ranks the tokens: most likely first, ties in id order (a stable sort), so that the draw
  // depends on the probabilities and the uniform number alone. Without it the tokens stay in id
  // order (a sort of the whole vocabulary per token was half of a GRPO step's sampling).
  torch::Tensor sorted = scores, order;
  if (options.top_p < 1.0) std::tie(sorted, order) = scores.sort(/*stable=*/true, /*dim=*/-1, /*descending=*/true);
  auto probabilities = sorted.softmax(-1);
  if (options.top_p < 1.0) {
    // Drop a token when the ones ranked above it already reach top_p; the first always stays.
    const auto drop = (probabilities.cumsum(-1) - probabilities) >= options.top_p;
    probabilities = sorted.masked_fill(drop, minus_inf).softmax(-1);
  }
  // The inverse CDF in float64: the first token whose cumulative probability passes u · total.
  // Rounding can carry u · total up to the total, past every token: the first whose cumulative
  // sum reaches the total (the last with any width in the CDF) is then the one taken.
  const auto cdf = probabilities.to(torch::kFloat64).cumsum(-1);
  const auto total = cdf.narrow(-1, vocab - 1, 1);
  const auto target = uniforms.to(torch::kFloat64).unsqueeze(-1) * total;
  const auto last_kept = torch::searchsorted(cdf, total, /*out_int32=*/false, /*right=*/false);
  const auto index =
      torch::minimum(torch::searchsorted(cdf, target, /*out_int32=*/false, /*right=*/true),
                     last_kept);
  return (order.defined() ? order.gather(-1, index) : index).squeeze(-1);
}

std::vector<Completion> sample(const Decoding& model, const std::vector<SampleRow>& rows,
                               const SamplingOptions& options,
                               const std::function<void(size_t row, int64_t token)>& on_token) {
  if (rows.empty()) throw RuntimeError("sample: the batch has no rows");
  check_options(options);
  size_t longest = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    if (rows[r].prompt.empty()) {
      throw RuntimeError(fmt::format("sample: the prompt of row {} (prompt {}, sample {}) has no "
                                     "tokens",
                                     r, rows[r].prompt_index, rows[r].sample_index));
    }
    longest = std::max(longest, rows[r].prompt.size());
  }
  const auto batch = static_cast<int64_t>(rows.size());
  const auto width = static_cast<int64_t>(longest), steps = options.max_new_tokens;
  if (width + steps > model.context) {
    throw RuntimeError(fmt::format("the prompt's {} tokens and max_new_tokens {} exceed the "
                                   "model's context of {} positions",
                                   longest, steps, model.context));
  }
  torch::NoGradGuard no_grad;
  const auto device = model.device;
  const auto ids = torch::dtype(torch::kInt64).device(device);
  // What a stopped row is fed and what fills the padding: any id does, as nothing attends to it.
  const int64_t pad = options.stop_tokens.empty() ? 0 : options.stop_tokens.front();

  // Left padding: every prompt ends at column width - 1, so that the rows write the same cache
  // position at each step and their next tokens' logits are the last column's.
  std::vector<int64_t> padded(static_cast<size_t>(batch * width), pad), first(rows.size());
  bool uneven = false;
  for (size_t r = 0; r < rows.size(); ++r) {
    first[r] = width - static_cast<int64_t>(rows[r].prompt.size());
    uneven = uneven || first[r] > 0;
    std::ranges::copy(rows[r].prompt, padded.begin() + static_cast<int64_t>(r) * width + first[r]);
  }
  KvCache cache;
  cache.capacity = width + steps;
  if (uneven) cache.first = torch::tensor(first, torch::kInt64).to(device);

  const auto uniforms = keyed_uniforms(rows, options.seed, options.step, steps).to(device);
  const auto stops = torch::tensor(options.stop_tokens, torch::kInt64).to(device);
  auto tokens = torch::full({batch, steps}, pad, ids);
  auto logprobs = torch::zeros({batch, steps}, torch::dtype(torch::kFloat32).device(device));
  auto lengths = torch::zeros({batch}, ids);
  auto stopped = torch::zeros({batch}, torch::dtype(torch::kBool).device(device));
  const int64_t check_every =
      options.check_every > 0 ? options.check_every : (device.is_cpu() ? 1 : 16);

  int64_t reported = 0;  // tokens on_token has seen of every row
  const auto report = [&](int64_t upto) {
    if (!on_token) return;
    const auto seen = tokens.narrow(1, reported, upto - reported).cpu();
    const auto length = lengths.cpu();
    for (int64_t r = 0; r < batch; ++r) {
      for (int64_t t = reported; t < std::min(upto, length[r].item<int64_t>()); ++t) {
        on_token(static_cast<size_t>(r), seen[r][t - reported].item<int64_t>());
      }
    }
    reported = upto;
  };

  const auto prompts = torch::tensor(padded, torch::kInt64).view({batch, width}).to(device);
  auto logits = model.next_logits(prompts, cache);
  int64_t produced = 0;
  while (produced < steps) {
    const auto scores = logits.to(torch::kFloat32);
    const auto picked = pick_tokens(scores, uniforms.select(1, produced), options);
    // The trainer's function of the same logits (GRPO's log-probabilities of its rows).
    const auto logprob = kernels::token_log_probs(logits, picked, 0,
                                                  options.temperature > 0.0 ? options.temperature : 1.0);
    const auto token = picked.masked_fill(stopped, pad);
    tokens.select(1, produced).copy_(token);
    logprobs.select(1, produced).copy_(logprob.masked_fill(stopped, 0.0));
    lengths += stopped.logical_not();
    stopped = stopped.logical_or(torch::isin(token, stops));
    ++produced;
    if (produced == steps) break;
    if (produced % check_every == 0) {
      report(produced);
      if (stopped.all().item<bool>()) break;
    }
    logits = model.next_logits(token.unsqueeze(1), cache);
  }
  report(produced);

  const auto host_tokens = tokens.cpu(), host_logprobs = logprobs.cpu();
  const auto host_lengths = lengths.cpu(), host_stopped = stopped.cpu();
  std::vector<Completion> completions(rows.size());
  for (int64_t r = 0; r < batch; ++r) {
    auto& completion = completions[static_cast<size_t>(r)];
    const int64_t length = host_lengths[r].item<int64_t>();
    const auto* row_tokens = host_tokens[r].data_ptr<int64_t>();
    const auto* row_logprobs = host_logprobs[r].data_ptr<float>();
    completion.tokens.assign(row_tokens, row_tokens + length);
    completion.logprobs.assign(row_logprobs, row_logprobs + length);
    completion.truncated = !host_stopped[r].item<bool>();
  }
  return completions;
}

std::vector<int64_t> generate(const Decoding& model, const std::vector<int64_t>& prompt,
                              const SamplingOptions& options,
                              const std::function<void(int64_t)>& on_token) {
  if (prompt.empty()) throw RuntimeError("generate: the prompt has no tokens");
  auto checked = options;
  checked.check_every = 1;
  const auto is_stop = [&](int64_t token) {
    return std::ranges::find(options.stop_tokens, token) != options.stop_tokens.end();
  };
  std::function<void(size_t, int64_t)> each;
  if (on_token) {
    each = [&](size_t, int64_t token) {
      if (!is_stop(token)) on_token(token);
    };
  }
  auto completion = sample(model, {SampleRow{prompt}}, checked, each).front();
  if (!completion.truncated) completion.tokens.pop_back();
  return completion.tokens;
}

}  // namespace ampt::models

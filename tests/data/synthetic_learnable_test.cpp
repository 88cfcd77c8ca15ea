#include "ampt/data/synthetic_images.h"
#include "ampt/data/synthetic_tokens.h"
#include "data/data_fixtures.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <numeric>

using namespace ampt::data;

TEST_CASE("synthetic tokens: seeded, and a bigram model's loss is far below ln(vocab)",
          "[data][synthetic][tokens]") {
  constexpr int64_t kVocab = 256, kTokens = 200'000, kTrain = 180'000;
  const auto span = synthetic_token_span(kTokens, kVocab, 3);
  const auto* t = static_cast<const uint16_t*>(span.data);
  const auto again = synthetic_token_span(kTokens, kVocab, 3);
  CHECK(std::equal(t, t + kTokens, static_cast<const uint16_t*>(again.data)));
  CHECK(max_token(span) < kVocab);

  // Bigram counts on the first 90%, lightly smoothed, scored on the rest.
  constexpr double kPrior = 0.01;
  std::vector<double> counts(kVocab * kVocab, kPrior), totals(kVocab, kPrior * kVocab);
  for (int64_t i = 0; i + 1 < kTrain; ++i) {
    counts[t[i] * kVocab + t[i + 1]] += 1;
    totals[t[i]] += 1;
  }
  double loss = 0;
  for (int64_t i = kTrain; i + 1 < kTokens; ++i) {
    loss -= std::log(counts[t[i] * kVocab + t[i + 1]] / totals[t[i]]);
  }
  loss /= static_cast<double>(kTokens - kTrain - 1);
  CHECK(loss < synthetic_token_entropy() + 0.2);
  CHECK(loss < 0.25 * std::log(kVocab));
}

TEST_CASE("synthetic tokens: a vocabulary beyond 65536 ids gives a uint32 stream",
          "[data][synthetic][tokens]") {
  constexpr int64_t kVocab = 151'936, kTokens = 10'000;  // Qwen2's padded vocabulary
  CHECK(synthetic_token_span(kTokens, 65'536, 3).bytes_per_token == 2);
  const auto span = synthetic_token_span(kTokens, kVocab, 3);
  REQUIRE(span.bytes_per_token == 4);
  const auto* t = static_cast<const uint32_t*>(span.data);
  const auto again = synthetic_token_span(kTokens, kVocab, 3);
  CHECK(std::equal(t, t + kTokens, static_cast<const uint32_t*>(again.data)));
  CHECK(max_token(span) < kVocab);
  CHECK(max_token(span) >= 65'536);
  const TokenWindows windows({span}, 8, kVocab);
  const auto batch = windows.gather({3});
  CHECK(ampt::test::as_vector(batch.inputs) == std::vector<int64_t>(t + 24, t + 32));
}

TEST_CASE("synthetic images: a linear classifier learns them", "[data][synthetic][images]") {
  const SyntheticImages images(2048, 10, 5);
  std::vector<int64_t> all(2048);
  std::iota(all.begin(), all.end(), int64_t{0});
  const auto data = images.gather(all);
  const auto x = data.inputs.flatten(1) - 0.5;
  torch::manual_seed(0);
  auto w = torch::zeros({x.size(1), 10}, torch::requires_grad());
  torch::optim::SGD sgd({w}, torch::optim::SGDOptions(0.05));
  double first = 0, last = 0;
  for (int step = 0; step < 60; ++step) {
    const auto rows = torch::randint(2048, {128}, torch::kInt64);
    const auto loss = torch::nn::functional::cross_entropy(x.index_select(0, rows).matmul(w),
                                                           data.targets.index_select(0, rows));
    sgd.zero_grad();
    loss.backward();
    sgd.step();
    (step == 0 ? first : last) = loss.item<double>();
  }
  CHECK(first == Approx(std::log(10.0)).epsilon(0.01));
  CHECK(last < 0.5);
}

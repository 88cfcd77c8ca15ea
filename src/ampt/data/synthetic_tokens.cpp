#include "ampt/data/synthetic_tokens.h"

#include "ampt/core/errors.h"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

namespace ampt::data {
namespace {

constexpr std::array<double, 4> kSuccessorProbability{0.7, 0.15, 0.1, 0.05};

// The chain's stream as tokens of type T: the same ids whatever T holds them.
template <class T>
TokenSpan markov_stream(int64_t tokens, int64_t vocab_size, uint64_t seed) {
  // mt19937_64 with plain modulo and scaling (not std:: distributions, whose output differs
  // between standard libraries) keeps the data identical everywhere.
  std::mt19937_64 rng(seed);
  const auto vocab = static_cast<uint64_t>(vocab_size);
  std::vector<T> successors(static_cast<size_t>(vocab_size) * kSuccessorProbability.size());
  for (auto& next : successors) next = static_cast<T>(rng() % vocab);

  auto stream = std::make_shared<std::vector<T>>(static_cast<size_t>(tokens));
  uint64_t current = rng() % vocab;
  for (auto& token : *stream) {
    token = static_cast<T>(current);
    double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;
    size_t choice = 0;
    while (choice + 1 < kSuccessorProbability.size() && u >= kSuccessorProbability[choice]) {
      u -= kSuccessorProbability[choice++];
    }
    current = successors[current * kSuccessorProbability.size() + choice];
  }
  TokenSpan span;
  span.name = "synthetic tokens";
  span.data = stream->data();
  span.count = tokens;
  span.bytes_per_token = static_cast<int>(sizeof(T));
  span.owner = std::move(stream);
  return span;
}

}  // namespace

double synthetic_token_entropy() {
  double entropy = 0.0;
  for (const double p : kSuccessorProbability) entropy -= p * std::log(p);
  return entropy;
}

TokenSpan synthetic_token_span(int64_t tokens, int64_t vocab_size, uint64_t seed) {
  constexpr int64_t kMaxIds = int64_t{1} << 32;
  if (vocab_size > kMaxIds) {
    throw RuntimeError(fmt::format(
        "synthetic tokens: vocab_size {} does not fit the uint32 token stream (at most {})",
        vocab_size, kMaxIds));
  }
  return vocab_size <= 65536 ? markov_stream<uint16_t>(tokens, vocab_size, seed)
                             : markov_stream<uint32_t>(tokens, vocab_size, seed);
}

}  // namespace ampt::data

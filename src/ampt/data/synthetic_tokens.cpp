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

}  // namespace

double synthetic_token_entropy() {
  double entropy = 0.0;
  for (const double p : kSuccessorProbability) entropy -= p * std::log(p);
  return entropy;
}

TokenSpan synthetic_token_span(int64_t tokens, int64_t vocab_size, uint64_t seed) {
  if (vocab_size > 65536) {
    throw RuntimeError(fmt::format(
        "synthetic tokens: vocab_size {} does not fit the uint16 token stream (at most 65536)",
        vocab_size));
  }
  // mt19937_64 with plain modulo and scaling (not std:: distributions, whose output differs
  // between standard libraries) keeps the data identical everywhere.
  std::mt19937_64 rng(seed);
  const auto vocab = static_cast<uint64_t>(vocab_size);
  std::vector<uint16_t> successors(static_cast<size_t>(vocab_size) * kSuccessorProbability.size());
  for (auto& next : successors) next = static_cast<uint16_t>(rng() % vocab);

  auto stream = std::make_shared<std::vector<uint16_t>>(static_cast<size_t>(tokens));
  uint64_t current = rng() % vocab;
  for (auto& token : *stream) {
    token = static_cast<uint16_t>(current);
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
  span.bytes_per_token = 2;
  span.owner = std::move(stream);
  return span;
}

}  // namespace ampt::data

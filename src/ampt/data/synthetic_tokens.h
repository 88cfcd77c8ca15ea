// A seeded, learnable token stream that needs no files: the GPT models' default data.
#pragma once

#include "ampt/data/token_windows.h"

#include <cstdint>

namespace ampt::data {

// A sparse Markov chain: every token has four possible successors, drawn once from the seed, taken
// with probabilities 0.7, 0.15, 0.1 and 0.05. The next-token entropy is at most 0.92 nats (less
// where two successors coincide), far below
// ln(vocab_size), so a language model's loss falls quickly once it learns the bigrams.
TokenSpan synthetic_token_span(int64_t tokens, int64_t vocab_size, uint64_t seed);

// 0.92 nats: the next-token entropy of that chain when a token's four successors are distinct.
double synthetic_token_entropy();

}  // namespace ampt::data

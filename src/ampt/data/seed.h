// Derives independent seeds from one run seed, so each epoch or sample has its own random stream.
#pragma once

#include <cstdint>

namespace ampt::data {

// splitmix64 of the pair: nearby (seed, stream) pairs give unrelated results.
constexpr uint64_t mix_seed(uint64_t seed, uint64_t stream) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ull * (stream + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace ampt::data

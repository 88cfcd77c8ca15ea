// CIFAR-10's binary batches: records of one label byte and 3072 pixel bytes (3 planes of 32x32).
#pragma once

#include "ampt/data/batch.h"

#include <string>
#include <vector>

namespace ampt::data {

inline constexpr int64_t kCifarPixels = 3 * 32 * 32;
inline constexpr int64_t kCifarRecord = 1 + kCifarPixels;

// The records of all `paths`, in order: inputs uint8 [N, 3, 32, 32], targets int64 [N]. Throws
// RuntimeError naming the file that is missing, empty, not a whole number of 3073-byte records,
// or holds a label >= 10.
Batch read_cifar_batches(const std::vector<std::string>& paths);

}  // namespace ampt::data

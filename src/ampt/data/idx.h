// MNIST-style IDX files (big-endian header, then unsigned bytes): images idx3, labels idx1.
#pragma once

#include <torch/types.h>

#include <string>

namespace ampt::data {

// uint8 [N, 1, rows, cols]. Throws RuntimeError naming the file when it is missing or empty, its
// magic is not 0x00000803, or its size differs from what the dimensions in the header say.
torch::Tensor read_idx_images(const std::string& path);

// int64 [N]; the same checks against magic 0x00000801.
torch::Tensor read_idx_labels(const std::string& path);

}  // namespace ampt::data

// The measurement behind --fp8_layers auto: one layer's forward and backward GEMMs in bf16 and in
// fp8 (quantisation included), timed on the device the run trains on.
#pragma once

#include "ampt/precision/fp8_layers.h"
#include "ampt/precision/fp8_linear.h"

#include <torch/types.h>

#include <functional>

namespace ampt::precision {

// A clock in milliseconds from any fixed point.
using Milliseconds = std::function<double()>;

// std::chrono::steady_clock's.
double steady_milliseconds();

// Times a Linear layer of the shape at `rows` rows, forward and backward (x's and the weight's
// gradients, the bias's too) on random data: as bf16 autocast runs it (the fp32 weight cast to
// bf16, then at::linear) against Fp8Linear under `recipe`. Each precision is warmed up, then the
// best of a few timed rounds of several iterations is taken, synchronising the device around
// each round and reading `clock` after each synchronisation. Works on any device (on a CPU it
// times the CPU's kernels).
GemmTimer gemm_timer(const torch::Device& device, const Fp8Recipe& recipe,
                     Milliseconds clock = steady_milliseconds);

}  // namespace ampt::precision

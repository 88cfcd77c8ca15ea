// How many gradient values a half dtype would flush to zero: the numerical-health statistic
// that tells whether the loss scale (fp16) is high enough.
#pragma once

#include <c10/core/ScalarType.h>
#include <torch/types.h>

#include <vector>

namespace ampt::precision {

// Counts, on the device, the elements of `grads` (fp32, as the backward pass left them: scaled by
// the loss scale when there is one) that are non-zero but become exactly 0 when cast to `half`
// (round to nearest: |g| at most half the smallest subnormal, 2^-25 for fp16, 2^-134 for bf16).
// Returns a float64 tensor [underflowing, non-zero]; underflowing / non-zero is the fraction of
// the gradient's information that a half-precision gradient would lose. inf/NaN count as
// non-zero and never as underflowing. Costs a pass over every gradient: for log steps only.
torch::Tensor underflow_counts(const std::vector<torch::Tensor>& grads, c10::ScalarType half);

}  // namespace ampt::precision

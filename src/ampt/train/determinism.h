// --deterministic: torch's deterministic algorithms and a seeded default generator, so that two
// runs of the same configuration on the same machine produce identical losses.
#pragma once

#include <cstdint>

namespace ampt::train {

// Call before any model, data or CUDA work. A no-op when `deterministic` is false (the data order
// and the weight initialisation are seeded either way).
void apply_determinism(bool deterministic, int64_t seed);

}  // namespace ampt::train

// Precompiled header for every translation unit that uses LibTorch: parsing torch.h once per
// target instead of once per file is most of the build time on a small machine.
#pragma once

#include <torch/torch.h>

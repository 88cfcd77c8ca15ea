// The kernels' element type (cuda/launch.h) of a tensor's dtype, for the .cpp files that call them.
#pragma once

#include "ampt/kernels/kernel_abi.h"

#include <c10/core/ScalarType.h>

namespace ampt::kernels {

// float32 for anything that is neither bfloat16 nor float16: callers pass only those three.
inline abi::Dtype cuda_dtype(c10::ScalarType type) {
  switch (type) {
    case c10::kBFloat16: return abi::Dtype::bfloat16;
    case c10::kHalf: return abi::Dtype::float16;
    default: return abi::Dtype::float32;
  }
}

}  // namespace ampt::kernels

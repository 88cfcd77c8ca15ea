// Writes tensors in the safetensors format that Python's `safetensors` and Hugging Face read.
#pragma once

#include "ampt/core/named_tensors.h"

#include <map>
#include <string>

namespace ampt::checkpoint {

// Layout: 8-byte little-endian header length N, N bytes of JSON
// {"__metadata__": {...}, "<name>": {"dtype": "F32", "shape": [...], "data_offsets": [b, e]}, ...}
// padded with spaces to a multiple of 8, then the tensors' bytes back to back (row-major,
// little-endian). Supports F32, F16, BF16, F64 and I64 tensors. Written atomically.
void write_safetensors(const std::string& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata);

}  // namespace ampt::checkpoint

// Tensors in the safetensors format that Python's `safetensors` and Hugging Face read and write.
#pragma once

#include "ampt/core/named_tensors.h"

#include <functional>
#include <map>
#include <string>

namespace ampt::checkpoint {

// Layout: 8-byte little-endian header length N, N bytes of JSON
// {"__metadata__": {...}, "<name>": {"dtype": "F32", "shape": [...], "data_offsets": [b, e]}, ...}
// padded with spaces to a multiple of 8, then the tensors' bytes back to back (row-major,
// little-endian). Supports F32, F16, BF16, F64 and I64 tensors. Written atomically.
void write_safetensors(const std::string& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata);

// The tensors of a safetensors file, on the CPU in the file's dtypes (F32, F16, BF16, F64, I64,
// I32, I16, I8, U8, BOOL), in the order of their data. Reads each tensor's bytes straight into its
// storage. A file that is short, whose header is not JSON, or whose entry has an unknown dtype or
// data_offsets that do not fit its shape or the file is one RuntimeError line naming the file and
// the tensor.
NamedTensors read_safetensors(const std::string& path);

// The same tensors given to `visit` one at a time as they are read (every entry is checked
// first): what `visit` does not keep is let go before the next is read, so that a file is never
// whole in memory.
void for_each_safetensor(const std::string& path,
                         const std::function<void(const std::string& name,
                                                  const torch::Tensor& tensor)>& visit);

}  // namespace ampt::checkpoint

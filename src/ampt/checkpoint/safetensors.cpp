#include "ampt/checkpoint/safetensors.h"

#include "ampt/checkpoint/atomic_file.h"
#include "ampt/core/errors.h"
#include "ampt/core/json_text.h"

#include <fmt/format.h>

#include <cstring>

namespace ampt::checkpoint {
namespace {

std::string dtype_name(torch::ScalarType type) {
  switch (type) {
    case torch::kFloat32: return "F32";
    case torch::kFloat16: return "F16";
    case torch::kBFloat16: return "BF16";
    case torch::kFloat64: return "F64";
    case torch::kInt64: return "I64";
    default: throw RuntimeError(fmt::format("safetensors export: unsupported dtype {}", c10::toString(type)));
  }
}

}  // namespace

void write_safetensors(const std::string& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<torch::Tensor> data;
  std::string header = "{\"__metadata__\":{";
  const char* separator = "";
  for (const auto& [key, value] : metadata) {
    header += fmt::format("{}{}:{}", separator, json_string(key), json_string(value));
    separator = ",";
  }
  header += "}";
  int64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    auto contiguous = tensor.detach().cpu().contiguous();
    const auto bytes = static_cast<int64_t>(contiguous.nbytes());
    header += fmt::format(",{}:{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{},{}]}}",
                          json_string(name), dtype_name(contiguous.scalar_type()),
                          fmt::join(contiguous.sizes(), ","), offset, offset + bytes);
    offset += bytes;
    data.push_back(std::move(contiguous));
  }
  header += "}";
  // The data section must start 8-byte aligned: readers map it and cast in place.
  header.append((8 - header.size() % 8) % 8, ' ');

  std::string file(8, '\0');
  const uint64_t header_size = header.size();
  for (int i = 0; i < 8; ++i) file[i] = static_cast<char>((header_size >> (8 * i)) & 0xFF);
  file.reserve(8 + header.size() + static_cast<size_t>(offset));
  file += header;
  for (const auto& t : data) file.append(static_cast<const char*>(t.data_ptr()), t.nbytes());
  write_file_atomically(path, file);
}

}  // namespace ampt::checkpoint

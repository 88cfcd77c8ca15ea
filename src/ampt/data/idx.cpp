#include "ampt/data/idx.h"

#include "ampt/core/errors.h"
#include "ampt/core/mapped_file.h"

#include <fmt/format.h>

#include <cstring>
#include <vector>

namespace ampt::data {
namespace {

uint32_t big_endian_u32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// The payload of an IDX file of unsigned bytes with `dims` dimensions, copied out of the mapping.
torch::Tensor read_idx(const std::string& path, uint32_t dims) {
  const MappedFile file(path);
  const uint32_t expected_magic = 0x0800u + dims;  // 0x08: unsigned byte data
  const int64_t header = 4 + 4 * int64_t{dims};
  if (static_cast<int64_t>(file.size()) < header) {
    throw RuntimeError(fmt::format("{}: {} bytes, shorter than an IDX header of {} dimensions",
                                   path, file.size(), dims));
  }
  if (const uint32_t magic = big_endian_u32(file.data()); magic != expected_magic) {
    throw RuntimeError(fmt::format("{}: IDX magic {:#010x} is not {:#010x} (ubyte, {} dims)", path,
                                   magic, expected_magic, dims));
  }
  std::vector<int64_t> shape;
  int64_t payload = 1;
  for (uint32_t d = 0; d < dims; ++d) {
    shape.push_back(big_endian_u32(file.data() + 4 + 4 * d));
    payload *= shape.back();
  }
  const int64_t held = static_cast<int64_t>(file.size()) - header;
  if (held != payload) {
    throw RuntimeError(fmt::format("{}: the header says {} = {} bytes of data but the file holds {}",
                                   path, fmt::join(shape, "x"), payload, held));
  }
  auto data = torch::empty(shape, torch::kUInt8);
  std::memcpy(data.data_ptr<uint8_t>(), file.data() + header, static_cast<size_t>(payload));
  return data;
}

}  // namespace

torch::Tensor read_idx_images(const std::string& path) { return read_idx(path, 3).unsqueeze(1); }

torch::Tensor read_idx_labels(const std::string& path) {
  return read_idx(path, 1).to(torch::kInt64);
}

}  // namespace ampt::data

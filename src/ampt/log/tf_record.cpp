#include "ampt/log/tf_record.h"

#include "ampt/log/crc32c.h"

#include <cstdint>

namespace ampt::log {
namespace {

constexpr std::size_t kLengthBytes = 8;
constexpr std::size_t kCrcBytes = 4;

template <class Int>
void put_le(std::string& out, Int value) {
  for (std::size_t i = 0; i < sizeof(Int); ++i) {
    out += static_cast<char>((static_cast<uint64_t>(value) >> (8 * i)) & 0xFFU);
  }
}

template <class Int>
Int get_le(std::string_view bytes) {
  uint64_t value = 0;
  for (std::size_t i = 0; i < sizeof(Int); ++i) {
    value |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  }
  return static_cast<Int>(value);
}

}  // namespace

std::string frame_record(std::string_view data) {
  std::string record;
  record.reserve(kLengthBytes + 2 * kCrcBytes + data.size());
  put_le<uint64_t>(record, data.size());
  put_le<uint32_t>(record, mask_crc(crc32c(record)));
  record += data;
  put_le<uint32_t>(record, mask_crc(crc32c(data)));
  return record;
}

std::vector<std::string> read_records(std::string_view file) {
  std::vector<std::string> records;
  while (file.size() >= kLengthBytes + kCrcBytes) {
    const auto length_bytes = file.substr(0, kLengthBytes);
    if (get_le<uint32_t>(file.substr(kLengthBytes)) != mask_crc(crc32c(length_bytes))) break;
    const auto length = get_le<uint64_t>(length_bytes);
    const std::size_t header = kLengthBytes + kCrcBytes;
    if (length > file.size() - header || file.size() - header - length < kCrcBytes) break;
    const auto data = file.substr(header, length);
    if (get_le<uint32_t>(file.substr(header + length)) != mask_crc(crc32c(data))) break;
    records.emplace_back(data);
    file.remove_prefix(header + length + kCrcBytes);
  }
  return records;
}

}  // namespace ampt::log

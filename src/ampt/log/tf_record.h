// TensorFlow's record framing, the container of TensorBoard event files: each record is its
// length (uint64, little-endian), the masked CRC-32C of those 8 bytes, the data, and the masked
// CRC-32C of the data.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ampt::log {

std::string frame_record(std::string_view data);

// The data of each complete record of `file` whose checksums hold, in order, up to the first one
// that is cut short or damaged: a writer killed mid-record loses only that record.
std::vector<std::string> read_records(std::string_view file);

}  // namespace ampt::log

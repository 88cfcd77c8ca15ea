#include "ampt/checkpoint/safetensors.h"

#include "ampt/checkpoint/atomic_file.h"
#include "ampt/core/errors.h"
#include "ampt/core/json_text.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>

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

std::optional<torch::ScalarType> dtype_of(const std::string& name) {
  static const std::vector<std::pair<std::string, torch::ScalarType>> known = {
      {"F32", torch::kFloat32}, {"F16", torch::kFloat16}, {"BF16", torch::kBFloat16},
      {"F64", torch::kFloat64}, {"I64", torch::kInt64},   {"I32", torch::kInt32},
      {"I16", torch::kInt16},   {"I8", torch::kInt8},     {"U8", torch::kUInt8},
      {"BOOL", torch::kBool}};
  for (const auto& [text, type] : known) {
    if (text == name) return type;
  }
  return std::nullopt;
}

// Headers are a few kilobytes to a few megabytes; anything beyond this is a damaged length.
constexpr uint64_t kMaxHeaderBytes = uint64_t{100} << 20;

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

void for_each_safetensor(const std::string& path,
                         const std::function<void(const std::string& name,
                                                  const torch::Tensor& tensor)>& visit) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw RuntimeError(fmt::format("{}: cannot open ({})", path, std::strerror(errno)));
  const auto file_size = std::filesystem::file_size(path);
  unsigned char length_bytes[8] = {};
  if (file_size < 8 || !in.read(reinterpret_cast<char*>(length_bytes), 8)) {
    throw RuntimeError(fmt::format("{}: {} bytes, too short for a safetensors header", path,
                                   file_size));
  }
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = (header_size << 8) | length_bytes[i];
  if (header_size > kMaxHeaderBytes || header_size > file_size - 8) {
    throw RuntimeError(fmt::format("{}: the header claims {} bytes but the file has {} after the "
                                   "length: truncated or not safetensors",
                                   path, header_size, file_size - 8));
  }
  std::string header(header_size, '\0');
  in.read(header.data(), static_cast<std::streamsize>(header_size));
  YAML::Node entries;
  try {
    entries = YAML::Load(header);  // JSON is YAML
  } catch (const YAML::Exception& e) {
    throw RuntimeError(fmt::format("{}: the header is not JSON ({})", path, e.msg));
  }
  if (!entries.IsMap()) throw RuntimeError(path + ": the header is not a JSON object");
  const uint64_t data_start = 8 + header_size, data_size = file_size - data_start;

  struct Entry {
    std::string name;
    torch::ScalarType dtype;
    std::vector<int64_t> shape;
    uint64_t begin, end;
  };
  std::vector<Entry> list;
  for (const auto& item : entries) {
    const auto name = item.first.as<std::string>();
    if (name == "__metadata__") continue;
    const auto& node = item.second;
    Entry entry{name, torch::kFloat32, {}, 0, 0};
    try {
      const auto dtype_text = node["dtype"].as<std::string>();
      const auto dtype = dtype_of(dtype_text);
      if (!dtype) {
        throw RuntimeError(fmt::format("{}: tensor {} has dtype {}, which ampt does not read", path,
                                       name, dtype_text));
      }
      entry.dtype = *dtype;
      entry.shape = node["shape"].as<std::vector<int64_t>>();
      const auto offsets = node["data_offsets"].as<std::vector<uint64_t>>();
      if (offsets.size() != 2) throw YAML::Exception(YAML::Mark::null_mark(), "two data_offsets");
      entry.begin = offsets[0];
      entry.end = offsets[1];
    } catch (const YAML::Exception&) {
      throw RuntimeError(fmt::format("{}: tensor {} lacks a dtype, a shape or two data_offsets",
                                     path, name));
    }
    int64_t numel = 1;
    for (const auto dim : entry.shape) numel *= dim;
    const auto bytes = static_cast<uint64_t>(numel) * c10::elementSize(entry.dtype);
    if (entry.end < entry.begin || entry.end - entry.begin != bytes) {
      throw RuntimeError(fmt::format("{}: tensor {} of shape [{}] needs {} bytes but its "
                                     "data_offsets span [{}, {})",
                                     path, name, fmt::join(entry.shape, ", "), bytes, entry.begin,
                                     entry.end));
    }
    if (entry.end > data_size) {
      throw RuntimeError(fmt::format("{}: tensor {} ends at byte {} of the data, which has {}: "
                                     "the file is truncated",
                                     path, name, entry.end, data_size));
    }
    list.push_back(std::move(entry));
  }
  std::ranges::sort(list, {}, &Entry::begin);
  for (const auto& entry : list) {
    auto tensor = torch::empty(entry.shape, torch::dtype(entry.dtype));
    in.seekg(static_cast<std::streamoff>(data_start + entry.begin));
    if (!in.read(static_cast<char*>(tensor.data_ptr()),
                 static_cast<std::streamsize>(entry.end - entry.begin))) {
      throw RuntimeError(fmt::format("{}: cannot read tensor {}", path, entry.name));
    }
    visit(entry.name, tensor);
  }
}

NamedTensors read_safetensors(const std::string& path) {
  NamedTensors tensors;
  for_each_safetensor(path, [&](const std::string& name, const torch::Tensor& tensor) {
    tensors.emplace_back(name, tensor);
  });
  return tensors;
}

}  // namespace ampt::checkpoint

// What the data tests share: builders for the byte layouts they write (llm.c and nanoGPT
// shards, IDX, CIFAR-10) and a dataset whose samples are their own indices.
#pragma once

#include "ampt/data/dataset.h"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace ampt::test {

inline void append_i32(std::string& bytes, int32_t value) {
  bytes.append(reinterpret_cast<const char*>(&value), sizeof value);
}

template <class T>
std::string raw_tokens(const std::vector<T>& tokens) {
  return {reinterpret_cast<const char*>(tokens.data()), tokens.size() * sizeof(T)};
}

inline std::string uint16_tokens(const std::vector<uint16_t>& tokens) { return raw_tokens(tokens); }

// llm.c's layout: 256 int32 (magic, version, token count, zeros), then the tokens: uint16 for
// GPT-2 (magic 20240520, version 1), uint32 for Llama 3 (magic 20240801, version 7).
template <class T>
std::string llmc_bytes(const std::vector<T>& tokens, int32_t magic, int32_t version,
                        int64_t header_count) {
  std::string bytes;
  append_i32(bytes, magic);
  append_i32(bytes, version);
  append_i32(bytes, static_cast<int32_t>(header_count < 0 ? tokens.size() : header_count));
  bytes.resize(256 * 4, '\0');
  return bytes + raw_tokens(tokens);
}

inline std::string llmc_shard(const std::vector<uint16_t>& tokens, int32_t magic = 20240520,
                              int32_t version = 1, int64_t header_count = -1) {
  return llmc_bytes(tokens, magic, version, header_count);
}

inline std::string llmc_uint32_shard(const std::vector<uint32_t>& tokens, int32_t magic = 20240801,
                                     int32_t version = 7, int64_t header_count = -1) {
  return llmc_bytes(tokens, magic, version, header_count);
}

inline void append_be32(std::string& bytes, uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(static_cast<char>(value >> shift));
}

// IDX: magic 0x0000080N (unsigned bytes, N dimensions), N big-endian sizes, then the data.
inline std::string idx_file(const std::vector<uint32_t>& dims, const std::string& data) {
  std::string bytes;
  append_be32(bytes, 0x0800u + static_cast<uint32_t>(dims.size()));
  for (const uint32_t d : dims) append_be32(bytes, d);
  return bytes + data;
}

// Pixel value of image `i` at byte `p`, so that reads can be checked exactly.
inline char pixel(int64_t i, int64_t p) { return static_cast<char>((i * 31 + p * 7) % 256); }

inline std::string idx_images(uint32_t n, uint32_t rows, uint32_t cols) {
  std::string data;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t p = 0; p < int64_t{rows} * cols; ++p) data.push_back(pixel(i, p));
  }
  return idx_file({n, rows, cols}, data);
}

inline std::string idx_labels(uint32_t n) {
  std::string data;
  for (uint32_t i = 0; i < n; ++i) data.push_back(static_cast<char>(i % 10));
  return idx_file({n}, data);
}

// CIFAR-10 records: label byte (i % 10), then 3072 pixel bytes.
inline std::string cifar_records(int64_t n, int64_t first = 0) {
  std::string bytes;
  for (int64_t i = first; i < first + n; ++i) {
    bytes.push_back(static_cast<char>(i % 10));
    for (int64_t p = 0; p < 3072; ++p) bytes.push_back(pixel(i, p));
  }
  return bytes;
}

// Sample i is input {i} and target i, so a batch shows which samples it holds. Gathering an
// index in `poisoned` throws, for testing how errors travel.
class IndexDataset : public data::Dataset {
 public:
  explicit IndexDataset(int64_t n, int64_t poisoned = -1) : n_(n), poisoned_(poisoned) {}
  int64_t size() const override { return n_; }
  data::Batch gather(const std::vector<int64_t>& indices) const override {
    for (const int64_t i : indices) {
      if (i == poisoned_) throw std::runtime_error("cannot read sample " + std::to_string(i));
    }
    auto targets = torch::tensor(indices, torch::kInt64);
    return {targets.to(torch::kFloat32).unsqueeze(1), targets};
  }

 private:
  int64_t n_;
  int64_t poisoned_;
};

inline std::string base64(const std::string& bytes) {
  static constexpr char kDigits[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t group = 0;
    for (std::size_t k = 0; k < 3; ++k) {
      group = (group << 8) | (i + k < bytes.size() ? static_cast<unsigned char>(bytes[i + k]) : 0U);
    }
    const std::size_t digits = std::min<std::size_t>(4, bytes.size() - i + 1);
    for (std::size_t k = 0; k < 4; ++k) out += k < digits ? kDigits[(group >> (18 - 6 * k)) & 63] : '=';
  }
  return out;
}

// A tiktoken rank file: the 256 bytes (id = byte), then `merged` tokens in order, each the join
// of two earlier ones; <|endoftext|> takes the next id. `extra` adds that many tokens of two
// bytes each, for vocabularies too large for a uint16 shard.
inline std::string toy_tiktoken(const std::vector<std::string>& merged = {"th", "the", " the",
                                                                           "in", "ing", " a"},
                                int extra = 0) {
  std::string file;
  int rank = 0;
  for (int b = 0; b < 256; ++b) file += base64(std::string(1, static_cast<char>(b))) + " " + std::to_string(rank++) + "\n";
  for (const auto& token : merged) file += base64(token) + " " + std::to_string(rank++) + "\n";
  for (int i = 0; i < extra; ++i) {
    const std::string pair{static_cast<char>(i % 256), static_cast<char>(i / 256)};
    file += base64(pair) + " " + std::to_string(rank++) + "\n";
  }
  return file;
}

inline std::vector<int64_t> as_vector(const torch::Tensor& t) {
  const auto flat = t.to(torch::kInt64).contiguous().view(-1);
  return {flat.data_ptr<int64_t>(), flat.data_ptr<int64_t>() + flat.numel()};
}

// The targets of every sample of `dataset`, in order.
inline std::vector<int64_t> all_targets(const data::Dataset& dataset) {
  std::vector<int64_t> indices(static_cast<size_t>(dataset.size()));
  for (size_t i = 0; i < indices.size(); ++i) indices[i] = static_cast<int64_t>(i);
  return as_vector(dataset.gather(indices).targets);
}

}  // namespace ampt::test

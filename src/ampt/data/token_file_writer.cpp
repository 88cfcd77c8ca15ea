#include "ampt/data/token_file_writer.h"

#include "ampt/core/errors.h"

#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <vector>

namespace ampt::data {
namespace {

std::array<int32_t, kLlmcHeaderInts> header(const LlmcLayout& layout, int64_t tokens) {
  std::array<int32_t, kLlmcHeaderInts> h{};
  h[0] = layout.magic;
  h[1] = layout.version;
  h[2] = static_cast<int32_t>(tokens);
  return h;
}

// Writes `ids` as tokens of type T; false when the write fails.
template <class T>
bool write_as(std::span<const int32_t> ids, std::FILE* file) {
  const std::vector<T> narrow(ids.begin(), ids.end());
  return std::fwrite(narrow.data(), sizeof(T), narrow.size(), file) == narrow.size();
}

}  // namespace

TokenFileWriter::TokenFileWriter(std::string path, int64_t vocab_size)
    : TokenFileWriter(std::move(path), llmc_layout(vocab_size)) {}

TokenFileWriter::TokenFileWriter(std::string path, const LlmcLayout& layout)
    : path_(std::move(path)),
      // The process id keeps two ranks that write the same shard at once apart.
      temporary_(fmt::format("{}.tmp-{}", path_, ::getpid())),
      layout_(layout) {
  file_ = std::fopen(temporary_.c_str(), "wb");
  if (file_ == nullptr) {
    throw RuntimeError(fmt::format("{}: cannot create: {}", temporary_, std::strerror(errno)));
  }
  const auto h = header(layout_, 0);  // the count is filled in by commit()
  if (std::fwrite(h.data(), sizeof(int32_t), h.size(), file_) != h.size()) fail("cannot write");
}

TokenFileWriter::~TokenFileWriter() {
  if (file_ == nullptr) return;
  std::fclose(file_);
  ::unlink(temporary_.c_str());
}

void TokenFileWriter::fail(const std::string& what) {
  throw RuntimeError(fmt::format("{}: {}: {}", temporary_, what, std::strerror(errno)));
}

void TokenFileWriter::count(std::size_t values) {
  if (tokens_ + static_cast<int64_t>(values) > std::numeric_limits<int32_t>::max()) {
    throw RuntimeError(fmt::format("{}: more than {} tokens, the most an llm.c shard counts; "
                                   "split the input into several shards",
                                   path_, std::numeric_limits<int32_t>::max()));
  }
  tokens_ += static_cast<int64_t>(values);
}

void TokenFileWriter::append(std::span<const int32_t> ids) {
  count(ids.size());
  const bool written = layout_.bytes_per_token == 2 ? write_as<uint16_t>(ids, file_)
                                                   : write_as<uint32_t>(ids, file_);
  if (!written) fail("cannot write");
}

void TokenFileWriter::append(std::span<const uint8_t> bytes) {
  if (layout_.bytes_per_token != 1) throw std::logic_error(path_ + ": bytes written into a token shard");
  count(bytes.size());
  if (std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size()) fail("cannot write");
}

void TokenFileWriter::commit() {
  const auto h = header(layout_, tokens_);
  if (std::fseek(file_, 0, SEEK_SET) != 0 ||
      std::fwrite(h.data(), sizeof(int32_t), h.size(), file_) != h.size() ||
      std::fflush(file_) != 0 || ::fsync(::fileno(file_)) != 0) {
    fail("cannot write");
  }
  const int closed = std::fclose(file_);
  file_ = nullptr;
  if (closed != 0 || std::rename(temporary_.c_str(), path_.c_str()) != 0) {
    const int error = errno;
    ::unlink(temporary_.c_str());
    throw RuntimeError(fmt::format("{}: cannot write: {}", path_, std::strerror(error)));
  }
}

}  // namespace ampt::data

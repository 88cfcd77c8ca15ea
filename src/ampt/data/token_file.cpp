#include "ampt/data/token_file.h"

#include "ampt/core/errors.h"
#include "ampt/core/mapped_file.h"

#include <fmt/format.h>

#include <cstring>
#include <memory>

namespace ampt::data {
namespace {

constexpr int64_t kHeaderBytes = kLlmcHeaderInts * 4;

int32_t header_int(const MappedFile& file, int64_t i) {
  int32_t value = 0;
  std::memcpy(&value, file.data() + i * 4, sizeof value);
  return value;
}

// llm.c's magics are dates (20240520 for GPT-2 tokens, 20240801 for Llama 3's); the first two
// uint16 tokens of a headerless file read as one int32 almost never fall in that range.
bool looks_like_llmc_magic(int32_t value) { return value >= 20240101 && value <= 20991231; }

// The tokens of `file`, an llm.c file of `layout` whose magic has been read: its version and
// count checked against the bytes it holds.
TokenSpan llmc_span(std::shared_ptr<const MappedFile> file, const std::string& path,
                    const LlmcLayout& layout) {
  const auto bytes = static_cast<int64_t>(file->size());
  if (bytes < kHeaderBytes) {
    throw RuntimeError(fmt::format("{}: {} bytes, shorter than the {}-byte llm.c header", path,
                                   bytes, kHeaderBytes));
  }
  if (const int32_t version = header_int(*file, 1); version != layout.version) {
    throw RuntimeError(
        fmt::format("{}: llm.c version {} is not supported (expected {} with magic {})", path,
                    version, layout.version, layout.magic));
  }
  const int64_t count = header_int(*file, 2);
  const int64_t held = (bytes - kHeaderBytes) / layout.bytes_per_token;
  if (count < 0 || count > held) {
    throw RuntimeError(fmt::format(
        "{}: truncated: the header says {} tokens but the file holds {}", path, count, held));
  }
  TokenSpan span;
  span.name = path;
  span.bytes_per_token = layout.bytes_per_token;
  span.data = file->data() + kHeaderBytes;
  span.count = count;
  span.owner = std::move(file);
  return span;
}

}  // namespace

TokenFile open_token_file(const std::string& path) {
  auto file = std::make_shared<const MappedFile>(path);
  const auto bytes = static_cast<int64_t>(file->size());
  const int32_t first = bytes >= 4 ? header_int(*file, 0) : 0;
  if (looks_like_llmc_magic(first)) {
    if (first != kLlmcUint16.magic && first != kLlmcUint32.magic) {
      throw RuntimeError(fmt::format("{}: llm.c magic {} is not {} ({}) or {} ({})", path, first,
                                     kLlmcUint16.magic, kLlmcUint16.what, kLlmcUint32.magic,
                                     kLlmcUint32.what));
    }
    const LlmcLayout& layout = first == kLlmcUint16.magic ? kLlmcUint16 : kLlmcUint32;
    return {llmc_span(std::move(file), path, layout), TokenFileFormat::llmc};
  }
  if (bytes % 2 != 0) {
    throw RuntimeError(fmt::format(
        "{}: odd byte length {}: a headerless (nanoGPT) file holds uint16 tokens", path, bytes));
  }
  TokenFile result;
  result.span.name = path;
  result.span.bytes_per_token = 2;
  result.format = TokenFileFormat::nanogpt;
  result.span.data = file->data();
  result.span.count = bytes / 2;
  result.span.owner = std::move(file);
  return result;
}

TokenSpan open_llmc_file(const std::string& path, const LlmcLayout& layout) {
  auto file = std::make_shared<const MappedFile>(path);
  const int32_t magic = file->size() >= 4 ? header_int(*file, 0) : 0;
  if (magic != layout.magic) {
    throw RuntimeError(fmt::format("{}: magic {} is not {} ({})", path, magic, layout.magic, layout.what));
  }
  return llmc_span(std::move(file), path, layout);
}

}  // namespace ampt::data

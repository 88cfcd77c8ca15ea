#include "ampt/text/record_files.h"

#include "ampt/core/errors.h"
#include "ampt/tables/table_file.h"
#include "ampt/text/read_file.h"

#include <fmt/format.h>
#include <zlib.h>

#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>
#include <filesystem>

namespace ampt::text {
namespace {

// A .gz file opened for reading, once its first bytes say gzip: zlib alone would read any other
// file as it is.
std::unique_ptr<gzFile_s, int (*)(gzFile)> open_gzip(const std::string& path) {
  {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw RuntimeError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
    std::array<unsigned char, 2> magic{};
    in.read(reinterpret_cast<char*>(magic.data()), 2);
    if (in.gcount() < 2 || magic[0] != 0x1f || magic[1] != 0x8b) {
      throw RuntimeError(fmt::format("{}: not a gzip file (one starts with the bytes 1f 8b)", path));
    }
  }
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) throw RuntimeError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  return {file, &gzclose};
}

}  // namespace

bool is_table_file(const std::string& path) {
  return path.ends_with(".parquet") || path.ends_with(".arrow") || tables::table_format(path).has_value();
}

int64_t for_each_file_record(const std::string& path, int64_t before,
                             const std::function<void(const JsonValue&, const RecordPlace&, int64_t)>& fn) {
  if (is_table_file(path)) {
    std::error_code error;
    const auto bytes = std::filesystem::file_size(path, error);
    const int64_t size = error ? 0 : static_cast<int64_t>(bytes);
    tables::for_each_row(path, [&](const JsonValue& row, const tables::RowPlace& at) {
      const RecordPlace place{path, static_cast<std::size_t>(at.row), at.group,
                              at.format == tables::TableFormat::parquet};
      fn(row, place, before + std::llround(at.read * static_cast<double>(size)));
    });
    return size;
  }
  if (!is_gzip_file(path)) {
    const std::string text = read_text_file(path);
    for_each_record(path, text, before, fn);
    return static_cast<int64_t>(text.size());
  }
  // Progress counts the file's own (compressed) bytes, as input_bytes does.
  const std::string text = read_gzip_file(path);
  std::error_code error;
  const auto bytes = std::filesystem::file_size(path, error);
  const double ratio = error ? 0.0 : static_cast<double>(bytes) / static_cast<double>(text.size());
  for_each_record(path, text, 0, [&](const JsonValue& record, const RecordPlace& place, int64_t done) {
    fn(record, place, before + std::llround(static_cast<double>(done) * ratio));
  });
  return error ? 0 : static_cast<int64_t>(bytes);
}

std::optional<JsonValue> first_file_record(const std::string& path) {
  if (is_table_file(path)) return tables::first_row(path);
  if (is_gzip_file(path)) {
    // Decompressed only as far as its first record: deciding how to read a corpus must not read
    // it whole (first_record's rule).
    const auto file = open_gzip(path);
    std::string text;
    std::array<char, 1 << 16> buffer{};
    int n = 0;
    while ((n = gzread(file.get(), buffer.data(), static_cast<unsigned>(buffer.size()))) > 0) {
      text.append(buffer.data(), static_cast<std::size_t>(n));
      const auto line_end = text.rfind('\n');
      if (line_end != std::string::npos && text.find_first_not_of(" \t\r\n") < line_end) break;
    }
    return first_record_in(text, /*whole_file=*/n <= 0);  // reading it whole says why it has none
  }
  return first_record(path);
}

bool is_gzip_file(const std::string& path) { return path.ends_with(".gz"); }

std::string read_gzip_file(const std::string& path) {
  const auto owned = open_gzip(path);
  gzFile file = owned.get();
  gzbuffer(file, 1 << 17);
  std::string text;
  std::array<char, 1 << 16> buffer{};
  int n = 0;
  while ((n = gzread(file, buffer.data(), static_cast<unsigned>(buffer.size()))) > 0) {
    text.append(buffer.data(), static_cast<std::size_t>(n));
  }
  int code = Z_OK;
  const std::string said = gzerror(file, &code);
  if (n < 0 || (code != Z_OK && code != Z_STREAM_END)) {
    throw RuntimeError(fmt::format("{}: a damaged gzip file: {} (after {} bytes of its contents)", path, said,
                                   text.size()));
  }
  if (text.empty()) throw RuntimeError(fmt::format("{}: file is empty (once decompressed)", path));
  return text;
}

}  // namespace ampt::text

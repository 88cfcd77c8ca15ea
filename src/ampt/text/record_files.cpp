#include "ampt/text/record_files.h"

#include "ampt/tables/table_file.h"
#include "ampt/text/read_file.h"

#include <cmath>
#include <filesystem>

namespace ampt::text {

bool is_table_file(const std::string& path) {
  return path.ends_with(".parquet") || path.ends_with(".arrow") || tables::table_format(path).has_value();
}

int64_t for_each_file_record(const std::string& path, int64_t before,
                             const std::function<void(const JsonValue&, const RecordPlace&, int64_t)>& fn) {
  if (is_table_file(path)) {
    std::error_code error;
    const auto bytes = std::filesystem::file_size(path, error);
    const int64_t size = error ? 0 : static_cast<int64_t>(bytes);
    const bool parquet = tables::table_format(path) == tables::TableFormat::parquet;
    tables::for_each_row(path, [&](const JsonValue& row, const tables::RowPlace& at) {
      const RecordPlace place{path, static_cast<std::size_t>(at.row), at.group, parquet};
      fn(row, place, before + std::llround(at.read * static_cast<double>(size)));
    });
    return size;
  }
  const std::string text = read_text_file(path);
  for_each_record(path, text, before, fn);
  return static_cast<int64_t>(text.size());
}

std::optional<JsonValue> first_file_record(const std::string& path) {
  if (is_table_file(path)) return tables::first_row(path);
  return first_record(path);
}

}  // namespace ampt::text

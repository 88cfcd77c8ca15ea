#include "ampt/tables/table_file.h"

#include "ampt/core/errors.h"

#include <arrow/api.h>
#include <arrow/io/file.h>
#include <arrow/ipc/reader.h>
#include <arrow/util/float16.h>
#include <parquet/arrow/reader.h>
#include <parquet/exception.h>
#include <parquet/file_reader.h>
#include <parquet/metadata.h>
#include <fmt/format.h>

#include <array>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

namespace ampt::tables {
namespace {

// Arrow's results unwrapped, a failure becoming "PATH: what Arrow says" (`where` after the path).
template <typename T>
T unwrap(arrow::Result<T> result, const std::string& path, const std::string& where = {}) {
  if (!result.ok()) {
    throw RuntimeError(fmt::format("{}: {}{}", path, where, result.status().message()));
  }
  return std::move(result).ValueUnsafe();
}

// The file's groups one after another: a Parquet file's row groups, an Arrow file's or stream's
// record batches.
class GroupReader {
 public:
  GroupReader(const std::string& path, TableFormat format) : path_(path), format_(format) {
    try {
      file_ = unwrap(arrow::io::ReadableFile::Open(path), path);
      switch (format) {
        case TableFormat::parquet:
          parquet_ = unwrap(parquet::arrow::OpenFile(file_, arrow::default_memory_pool()), path,
                            "not a readable Parquet file: ");
          rows_ = parquet_->parquet_reader()->metadata()->num_rows();
          groups_ = parquet_->num_row_groups();
          if (const auto status = parquet_->GetSchema(&schema_); !status.ok()) {
            throw RuntimeError(fmt::format("{}: not a readable Parquet file: {}", path, status.message()));
          }
          break;
        case TableFormat::arrow_file:
          ipc_file_ = unwrap(arrow::ipc::RecordBatchFileReader::Open(file_), path,
                             "not a readable Arrow IPC file: ");
          groups_ = ipc_file_->num_record_batches();
          rows_ = unwrap(ipc_file_->CountRows(), path, "not a readable Arrow IPC file: ");
          schema_ = ipc_file_->schema();
          break;
        case TableFormat::arrow_stream:
          ipc_stream_ = unwrap(arrow::ipc::RecordBatchStreamReader::Open(file_), path,
                               "not a readable Arrow IPC stream: ");
          schema_ = ipc_stream_->schema();
          break;
      }
    } catch (const parquet::ParquetException& e) {
      throw RuntimeError(fmt::format("{}: not a readable Parquet file: {}", path, e.what()));
    }
  }

  const std::shared_ptr<arrow::Schema>& schema() const { return schema_; }
  // Unknown (-1) for a stream until it has been read.
  int64_t rows() const { return rows_; }

  // The next group's rows, or nullptr after the last.
  std::shared_ptr<arrow::RecordBatch> next() {
    const std::string where = fmt::format("{} {}: ", format_ == TableFormat::parquet ? "row group" : "record batch", next_);
    try {
      std::shared_ptr<arrow::RecordBatch> batch;
      switch (format_) {
        case TableFormat::parquet: {
          if (next_ >= groups_) return nullptr;
          const auto table = unwrap(parquet_->ReadRowGroup(static_cast<int>(next_)), path_, where);
          batch = unwrap(table->CombineChunksToBatch(), path_, where);
          break;
        }
        case TableFormat::arrow_file:
          if (next_ >= groups_) return nullptr;
          batch = unwrap(ipc_file_->ReadRecordBatch(static_cast<int>(next_)), path_, where);
          break;
        case TableFormat::arrow_stream:
          batch = unwrap(ipc_stream_->Next(), path_, where);
          if (!batch) return nullptr;
          break;
      }
      // An IPC file's buffers are the file's bytes as they are: the full checks (every offset
      // within its buffer, UTF-8) make a corrupt batch an error here rather than a read out of
      // bounds below. Parquet's decoder builds its arrays itself, and checks what it decodes.
      const auto status = format_ == TableFormat::parquet ? batch->Validate() : batch->ValidateFull();
      if (!status.ok()) {
        throw RuntimeError(fmt::format("{}: {}{}", path_, where, status.message()));
      }
      ++next_;
      return batch;
    } catch (const parquet::ParquetException& e) {
      throw RuntimeError(fmt::format("{}: {}{}", path_, where, e.what()));
    }
  }

 private:
  const std::string& path_;
  TableFormat format_;
  std::shared_ptr<arrow::io::ReadableFile> file_;
  std::unique_ptr<parquet::arrow::FileReader> parquet_;
  std::shared_ptr<arrow::ipc::RecordBatchFileReader> ipc_file_;
  std::shared_ptr<arrow::ipc::RecordBatchStreamReader> ipc_stream_;
  std::shared_ptr<arrow::Schema> schema_;
  int64_t rows_ = -1;
  int64_t groups_ = -1;
  int64_t next_ = 0;
};

JsonValue number(double value, bool integral) {
  JsonValue v;
  v.kind = JsonValue::Kind::number;
  v.number = value;
  v.integral = integral;
  return v;
}

JsonValue string_value(std::string_view text) {
  JsonValue v;
  v.kind = JsonValue::Kind::string;
  v.string = std::string(text);
  return v;
}

bool has_no_json_form(const arrow::DataType& type) {
  switch (type.id()) {
    case arrow::Type::BINARY:
    case arrow::Type::LARGE_BINARY:
    case arrow::Type::BINARY_VIEW:
    case arrow::Type::FIXED_SIZE_BINARY: return true;
    default: return false;
  }
}

JsonValue value_at(const arrow::Array& array, int64_t i);

// Row i of a list column: the items of its one values array (child arrays are built once per
// column, where value_slice would build one per row), from the row's offset on.
template <typename List>
JsonValue list_at(const arrow::Array& array, int64_t i) {
  const auto& list = static_cast<const List&>(array);
  const arrow::Array& values = *list.values();
  const int64_t first = list.value_offset(i);
  const int64_t count = list.value_length(i);
  JsonValue v;
  v.kind = JsonValue::Kind::array;
  v.items.reserve(static_cast<std::size_t>(count));
  for (int64_t k = first; k < first + count; ++k) v.items.push_back(value_at(values, k));
  return v;
}

template <typename Strings>
JsonValue string_at(const arrow::Array& array, int64_t i) {
  return string_value(static_cast<const Strings&>(array).GetView(i));
}

template <typename Numbers>
JsonValue number_at(const arrow::Array& array, int64_t i, bool integral) {
  return number(static_cast<double>(static_cast<const Numbers&>(array).Value(i)), integral);
}

JsonValue value_at(const arrow::Array& array, int64_t i) {
  if (array.IsNull(i)) return {};
  switch (array.type_id()) {
    case arrow::Type::NA: return {};
    case arrow::Type::BOOL: {
      JsonValue v;
      v.kind = JsonValue::Kind::boolean;
      v.boolean = static_cast<const arrow::BooleanArray&>(array).Value(i);
      return v;
    }
    case arrow::Type::INT8: return number_at<arrow::Int8Array>(array, i, true);
    case arrow::Type::INT16: return number_at<arrow::Int16Array>(array, i, true);
    case arrow::Type::INT32: return number_at<arrow::Int32Array>(array, i, true);
    case arrow::Type::INT64: return number_at<arrow::Int64Array>(array, i, true);
    case arrow::Type::UINT8: return number_at<arrow::UInt8Array>(array, i, true);
    case arrow::Type::UINT16: return number_at<arrow::UInt16Array>(array, i, true);
    case arrow::Type::UINT32: return number_at<arrow::UInt32Array>(array, i, true);
    case arrow::Type::UINT64: return number_at<arrow::UInt64Array>(array, i, true);
    case arrow::Type::HALF_FLOAT:
      return number(arrow::util::Float16::FromBits(static_cast<const arrow::HalfFloatArray&>(array).Value(i)).ToDouble(),
                    false);
    case arrow::Type::FLOAT: return number_at<arrow::FloatArray>(array, i, false);
    case arrow::Type::DOUBLE: return number_at<arrow::DoubleArray>(array, i, false);
    case arrow::Type::STRING: return string_at<arrow::StringArray>(array, i);
    case arrow::Type::LARGE_STRING: return string_at<arrow::LargeStringArray>(array, i);
    case arrow::Type::STRING_VIEW: return string_at<arrow::StringViewArray>(array, i);
    case arrow::Type::LIST: return list_at<arrow::ListArray>(array, i);
    case arrow::Type::LARGE_LIST: return list_at<arrow::LargeListArray>(array, i);
    case arrow::Type::FIXED_SIZE_LIST: return list_at<arrow::FixedSizeListArray>(array, i);
    case arrow::Type::LIST_VIEW: return list_at<arrow::ListViewArray>(array, i);
    case arrow::Type::LARGE_LIST_VIEW: return list_at<arrow::LargeListViewArray>(array, i);
    case arrow::Type::STRUCT: {
      const auto& fields = static_cast<const arrow::StructArray&>(array);
      const auto& type = *fields.struct_type();
      JsonValue v;
      v.kind = JsonValue::Kind::object;
      for (int k = 0; k < fields.num_fields(); ++k) {
        if (has_no_json_form(*type.field(k)->type())) continue;
        v.members.emplace_back(type.field(k)->name(), value_at(*fields.field(k), i));
      }
      return v;
    }
    case arrow::Type::MAP: {
      const auto& map = static_cast<const arrow::MapArray&>(array);
      const arrow::Array& keys = *map.keys();
      const arrow::Array& items = *map.items();
      JsonValue v;
      v.kind = JsonValue::Kind::object;
      for (int64_t k = map.value_offset(i); k < map.value_offset(i) + map.value_length(i); ++k) {
        JsonValue key = value_at(keys, k);
        // A map of other keys has no JSON object: its entries as [key, value] pairs.
        if (key.kind != JsonValue::Kind::string) return list_at<arrow::MapArray>(array, i);
        v.members.emplace_back(std::move(key.string), value_at(items, k));
      }
      return v;
    }
    case arrow::Type::DICTIONARY: {
      const auto& dictionary = static_cast<const arrow::DictionaryArray&>(array);
      return value_at(*dictionary.dictionary(), dictionary.GetValueIndex(i));
    }
    default: {
      // Dates, times, timestamps, decimals, durations: the text Arrow prints for the value.
      const auto scalar = array.GetScalar(i);
      return scalar.ok() ? string_value((*scalar)->ToString()) : JsonValue{};
    }
  }
}

// Row i of `batch` as an object of its columns (binary ones left out).
JsonValue row_at(const arrow::RecordBatch& batch, int64_t i) {
  JsonValue row;
  row.kind = JsonValue::Kind::object;
  const auto& schema = *batch.schema();
  for (int c = 0; c < batch.num_columns(); ++c) {
    if (has_no_json_form(*schema.field(c)->type())) continue;
    row.members.emplace_back(schema.field(c)->name(), value_at(*batch.column(c), i));
  }
  return row;
}

TableFormat required_format(const std::string& path) {
  const auto format = table_format(path);
  if (!format) {
    std::error_code error;
    const auto size = std::filesystem::file_size(path, error);
    if (error) throw RuntimeError(fmt::format("{}: cannot read it: {}", path, error.message()));
    throw RuntimeError(fmt::format("{}: {}, not a Parquet or Arrow table (a Parquet file starts with PAR1, "
                                   "an Arrow IPC file with ARROW1, an IPC stream with 0xFFFFFFFF)",
                                   path, size == 0 ? "an empty file" : "another kind of file"));
  }
  return *format;
}

}  // namespace

std::string_view format_name(TableFormat format) {
  switch (format) {
    case TableFormat::parquet: return "Parquet";
    case TableFormat::arrow_file: return "Arrow IPC file";
    case TableFormat::arrow_stream: return "Arrow IPC stream";
  }
  return "?";
}

std::optional<TableFormat> table_format(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::array<char, 6> head{};
  in.read(head.data(), head.size());
  const auto got = in.gcount();
  if (got >= 4 && std::memcmp(head.data(), "PAR1", 4) == 0) return TableFormat::parquet;
  if (got >= 6 && std::memcmp(head.data(), "ARROW1", 6) == 0) return TableFormat::arrow_file;
  if (got >= 4 && std::memcmp(head.data(), "\xff\xff\xff\xff", 4) == 0) return TableFormat::arrow_stream;
  return std::nullopt;
}

std::string table_schema(const std::string& path) {
  GroupReader reader(path, required_format(path));
  std::string schema;
  for (const auto& field : reader.schema()->fields()) {
    schema += fmt::format("{}{}: {}", schema.empty() ? "" : ", ", field->name(), field->type()->ToString());
  }
  return schema;
}

void for_each_row(const std::string& path,
                  const std::function<void(const JsonValue& row, const RowPlace& place)>& fn) {
  RowPlace place;
  place.format = required_format(path);
  GroupReader reader(path, place.format);
  const double rows = static_cast<double>(reader.rows());
  for (; const auto batch = reader.next(); ++place.group) {
    for (int64_t i = 0; i < batch->num_rows(); ++i) {
      ++place.row;
      if (rows > 0) place.read = static_cast<double>(place.row) / rows;
      fn(row_at(*batch, i), place);
    }
  }
}

std::optional<JsonValue> first_row(const std::string& path) {
  GroupReader reader(path, required_format(path));
  while (const auto batch = reader.next()) {
    if (batch->num_rows() > 0) return row_at(*batch, 0);
  }
  return std::nullopt;
}

}  // namespace ampt::tables

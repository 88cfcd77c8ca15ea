// A Parquet or Arrow file's rows as JSON objects, one row group or record batch decoded at a time.
#pragma once

#include "ampt/core/json_reader.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace ampt::tables {

enum class TableFormat { parquet, arrow_file, arrow_stream };
std::string_view format_name(TableFormat format);  // "Parquet", "Arrow IPC file", "Arrow IPC stream"

// The format `path`'s first bytes say: Parquet's "PAR1", an Arrow IPC file's "ARROW1", an Arrow IPC
// stream's continuation marker (what datasets' save_to_disk writes); nullopt for any other file,
// or one that cannot be read.
std::optional<TableFormat> table_format(const std::string& path);

// Where a row is: its number in the file from 1, and its row group (Parquet) or record batch
// (Arrow) from 0.
struct RowPlace {
  TableFormat format = TableFormat::parquet;  // which names its groups: row groups or record batches
  int64_t row = 0;
  int64_t group = 0;
  double read = 0;  // the share of the file's rows read through this one; 0 where a stream's count is unknown
};

// The table's columns as Arrow names their types, "text: string, messages: list<element:
// struct<role: string, content: string>>", read from its footer or header alone. Throws
// RuntimeError "PATH: ..." for a file that is not a table or cannot be read.
std::string table_schema(const std::string& path);

// Calls fn(row, place) for every row in file order, each row an object of the columns in schema
// order: null for a null value, lists and structs as arrays and objects, a map with string keys as
// an object. Throws RuntimeError "PATH: ..." for a file that is not a table (truncated, corrupt,
// empty) and "PATH: row group G: ..." for a group that cannot be decoded; an exception fn throws
// goes through as it is.
void for_each_row(const std::string& path,
                  const std::function<void(const JsonValue& row, const RowPlace& place)>& fn);

// The first row, without decoding more than its group; nullopt for a table of no rows. Throws as
// for_each_row.
std::optional<JsonValue> first_row(const std::string& path);

}  // namespace ampt::tables

// The records of a file, whichever form it holds them in: JSON Lines (one JSON value a line, plain
// or gzip-compressed), or
// a Parquet or Arrow table (one object of its columns a row: tables/table_file.h), told apart by
// the file's first bytes (or name), so that a .parquet file named as jsonl: data reads as the
// table it is.
#pragma once

#include "ampt/core/json_reader.h"
#include "ampt/text/json_lines.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace ampt::text {

// Whether `path` is a Parquet or Arrow file, by its first bytes or its name (.parquet, .arrow: one
// that is not a table then says so, rather than failing as JSON).
bool is_table_file(const std::string& path);

// Calls fn(record, place, done) for each record of `path` in order, `done` being `before` plus the
// file's bytes read through the record (a table's: its size in proportion to the rows read).
// Returns the file's size. Throws RuntimeError naming the file, and the line or row, that cannot
// be read.
int64_t for_each_file_record(const std::string& path, int64_t before,
                             const std::function<void(const JsonValue&, const RecordPlace&, int64_t)>& fn);

// Whether `path` is gzip-compressed JSON Lines, by its name (data.jsonl.gz): read whole, through
// zlib, as the plain file is.
bool is_gzip_file(const std::string& path);

// A .gz file's contents. Throws RuntimeError "PATH: not a gzip file (...)" for one whose first bytes
// are not gzip's, "PATH: a damaged gzip file: ..." for a truncated or corrupt one, and "PATH: file
// is empty (once decompressed)".
std::string read_gzip_file(const std::string& path);

// The first record of `path` (first_record's, or a table's first row); nullopt when it has none
// or is not JSON (reading it whole says why). Throws RuntimeError for a table that cannot be read.
std::optional<JsonValue> first_file_record(const std::string& path);

}  // namespace ampt::text

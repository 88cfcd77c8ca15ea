// JSON Lines files read record by record: each non-blank line one JSON value, numbered from 1
// for errors, with the input bytes read up to its end for progress.
#pragma once

#include "ampt/core/json_reader.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace ampt::text {

// Where a record was read: what every error about it starts with ("data/a.jsonl: line 7", or a
// table's "data/a.parquet: row group 2, row 7" and "data/a.arrow: record batch 0, row 7").
struct RecordPlace {
  const std::string& path;
  std::size_t line = 0;  // a table's row, from 1
  int64_t group = -1;    // a table's row group (Parquet) or record batch (Arrow), from 0
  bool parquet = false;
  std::string prefix() const;
};

// Calls fn(record, place, done) for each non-blank line of `text`, the contents of `path`; `done`
// is `before` plus the bytes of `text` up to the line's end. Throws RuntimeError "PATH: line N:
// invalid JSON: ..." for a line that is not JSON.
void for_each_record(const std::string& path, std::string_view text, int64_t before,
                     const std::function<void(const JsonValue&, const RecordPlace&, int64_t)>& fn);

// The first record of `path`; nullopt when it is empty or not JSON (reading it whole says why).
std::optional<JsonValue> first_record(const std::string& path);
// The same of `text`, the first bytes of a file (all of it where `whole_file`): its first
// non-blank line that is complete (ended by a newline, or by the end of a whole file); nullopt for
// none, or one that is not JSON.
std::optional<JsonValue> first_record_in(std::string_view text, bool whole_file);

}  // namespace ampt::text

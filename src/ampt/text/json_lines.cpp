#include "ampt/text/json_lines.h"

#include "ampt/core/errors.h"
#include "ampt/text/read_file.h"

#include <fmt/format.h>

#include <fstream>

namespace ampt::text {
namespace {

bool blank(std::string_view line) { return line.find_first_not_of(" \t") == std::string_view::npos; }

}  // namespace

std::string RecordPlace::prefix() const {
  if (group < 0) return fmt::format("{}: line {}", path, line);
  return fmt::format("{}: {} {}, row {}", path, parquet ? "row group" : "record batch", group, line);
}

void for_each_record(const std::string& path, std::string_view text, int64_t before,
                     const std::function<void(const JsonValue&, const RecordPlace&, int64_t)>& fn) {
  for_each_line(text, [&](std::string_view line, std::size_t number) {
    if (blank(line)) return;
    const RecordPlace place{path, number};
    JsonValue record;
    try {
      record = parse_json(line);
    } catch (const JsonError& e) {
      throw RuntimeError(fmt::format("{}: invalid JSON: {}", place.prefix(), e.what()));
    }
    fn(record, place, before + static_cast<int64_t>(line.data() + line.size() - text.data()));
  });
}

std::optional<JsonValue> first_record_in(std::string_view text, bool whole_file) {
  if (!whole_file) text = text.substr(0, text.rfind('\n') + 1);  // npos + 1: nothing
  std::optional<std::string_view> first;
  for_each_line(text, [&](std::string_view line, std::size_t) {
    if (!first && !blank(line)) first = line;
  });
  if (!first) return std::nullopt;
  try {
    return parse_json(*first);
  } catch (const JsonError&) {
    return std::nullopt;
  }
}

std::optional<JsonValue> first_record(const std::string& path) {
  // One line, not the file: deciding how to read a corpus must not read it twice.
  std::ifstream in(path, std::ios::binary);
  for (std::string line; std::getline(in, line);) {
    if (blank(line) || line == "\r") continue;
    try {
      return parse_json(line);
    } catch (const JsonError&) {
      return std::nullopt;
    }
  }
  return std::nullopt;
}

}  // namespace ampt::text

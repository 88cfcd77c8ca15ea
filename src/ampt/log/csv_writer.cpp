#include "ampt/log/csv_writer.h"

#include "ampt/core/errors.h"
#include "ampt/core/whole_file.h"
#include "ampt/log/run_files.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace ampt::log {
namespace {

namespace fs = std::filesystem;

using Row = std::map<std::string, std::string>;

std::vector<std::string> split_cells(std::string line) {
  if (line.ends_with('\r')) line.pop_back();
  std::vector<std::string> cells;
  std::istringstream in(line);
  for (std::string cell; std::getline(in, cell, ',');) cells.push_back(cell);
  if (!line.empty() && line.back() == ',') cells.emplace_back();
  return cells;
}

// The header and the rows of a metrics.csv, less a last line that a killed run left unfinished.
std::pair<std::vector<std::string>, std::vector<Row>> read_table(const std::string& path) {
  auto text = read_whole_file(path);
  const auto end = text.rfind('\n');
  text.resize(end == std::string::npos ? 0 : end + 1);
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line)) return {};
  auto columns = split_cells(line);
  std::vector<Row> rows;
  while (std::getline(in, line)) {
    const auto cells = split_cells(line);
    if (cells.size() != columns.size()) {
      throw RuntimeError(fmt::format("'{}' has a row of {} cells under a header of {}: not a "
                                     "metrics.csv ampt wrote",
                                     path, cells.size(), columns.size()));
    }
    Row row;
    for (std::size_t i = 0; i < cells.size(); ++i) row[columns[i]] = cells[i];
    rows.push_back(std::move(row));
  }
  return {std::move(columns), std::move(rows)};
}

std::string format_row(const std::vector<std::string>& columns, const Row& row) {
  std::string line;
  for (std::size_t i = 0; i < columns.size(); ++i) {
    if (i > 0) line += ',';
    if (const auto cell = row.find(columns[i]); cell != row.end()) line += cell->second;
  }
  return line + "\r\n";  // csv.DictWriter's line terminator
}

std::string format_table(const std::vector<std::string>& columns, const std::vector<Row>& rows) {
  Row header;
  for (const auto& column : columns) header[column] = column;
  std::string text = format_row(columns, header);
  for (const auto& row : rows) text += format_row(columns, row);
  return text;
}

// Python's repr of a float, as csv.writer writes it: "0.001", "1e-05", "32768.0", "inf", "nan".
std::string python_float(double value) {
  if (std::isnan(value)) return "nan";  // whatever its sign bit
  auto text = fmt::format("{}", value);
  if (text.find_first_of(".ein") == std::string::npos) text += ".0";
  return text;
}

std::string cell_text(const Scalar& value) {
  return value.integer ? fmt::format("{}", static_cast<int64_t>(value.value))
                       : python_float(value.value);
}

}  // namespace

CsvWriter::CsvWriter(const std::string& output_dir)
    : path_((fs::path(output_dir) / "metrics.csv").string()) {}

void CsvWriter::on_start(const RunInfo& info) {
  run_ = info;
  if (!fs::exists(path_)) return;
  if (info.start_step == 0) {
    keep_earlier_run(path_, "metrics.csv");
    return;
  }
  auto [columns, rows] = read_table(path_);
  std::erase_if(rows, [&](const Row& row) {
    int64_t step = -1;
    const auto& cell = row.count("step") != 0 ? row.at("step") : std::string();
    std::from_chars(cell.data(), cell.data() + cell.size(), step);
    return step < 0 || step > info.start_step;
  });
  columns_ = std::move(columns);
  std::ranges::sort(columns_);  // as this writer keeps them, whoever wrote the header
  replace_file(path_, columns_.empty() ? "" : format_table(columns_, rows));
}

void CsvWriter::add_row(const std::vector<Scalar>& values, int64_t step, int64_t epoch) {
  Row row;
  for (const auto& value : values) row[value.name] = cell_text(value);
  row.emplace("epoch", fmt::format("{}", epoch));  // Lightning's setdefault("epoch", ...)
  row["step"] = fmt::format("{}", step);
  const bool has_header = !columns_.empty();
  bool widened = false;
  for (const auto& [name, cell] : row) {
    if (std::ranges::find(columns_, name) == columns_.end()) {
      columns_.push_back(name);
      widened = true;
    }
  }
  std::ranges::sort(columns_);
  if (widened && has_header) {
    replace_file(path_, format_table(columns_, read_table(path_).second));
  }
  std::ofstream out(path_, std::ios::binary | std::ios::app);
  if (!has_header) out << format_table(columns_, {});
  out << format_row(columns_, row);
  if (!out.flush()) throw RuntimeError("cannot write metrics to '" + path_ + "'");
}

void CsvWriter::on_step(const StepReport& report) {
  add_row(step_scalars(report, run_), report.step, report.epoch);
}

void CsvWriter::on_eval(const EvalReport& report) {
  if (report.batches == 0) return;
  add_row(eval_scalars(report), report.step, report.epoch);
}

void CsvWriter::on_precision_switch(const PrecisionSwitch& change) {
  add_row({stage_scalar(change)}, change.step, change.epoch);
}

}  // namespace ampt::log

// Reads back a run's metrics.jsonl (what `ampt plot` draws), one record per complete line.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace ampt::log {

// One line of metrics.jsonl: a logged step (it has "loss"), an evaluation ("val_loss") or an
// event such as a precision switch ("event": "precision_switch").
struct MetricsRecord {
  std::map<std::string, double> numbers;     // numeric fields; null (a non-finite value) as NaN
  std::map<std::string, std::string> texts;  // strings and booleans, as written

  bool has(const std::string& key) const { return numbers.contains(key); }
  double number(const std::string& key) const;  // NaN when absent
  std::string text(const std::string& key) const;  // empty when absent
};

// Throws RuntimeError when the file cannot be read. A line that is not a JSON object (the last
// line of a run killed mid-write) is left out.
std::vector<MetricsRecord> read_metrics_jsonl(const std::string& path);

}  // namespace ampt::log

#include "ampt/log/metrics_file.h"

#include "ampt/core/errors.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <limits>

namespace ampt::log {

double MetricsRecord::number(const std::string& key) const {
  const auto found = numbers.find(key);
  return found == numbers.end() ? std::numeric_limits<double>::quiet_NaN() : found->second;
}

std::string MetricsRecord::text(const std::string& key) const {
  const auto found = texts.find(key);
  return found == texts.end() ? std::string() : found->second;
}

std::vector<MetricsRecord> read_metrics_jsonl(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw RuntimeError("cannot read '" + path + "'");
  std::vector<MetricsRecord> records;
  for (std::string line; std::getline(in, line);) {
    YAML::Node node;
    try {
      node = YAML::Load(line);  // a JSON object is a YAML flow mapping
    } catch (const YAML::Exception&) {
      continue;
    }
    if (!node.IsMap()) continue;
    MetricsRecord record;
    for (const auto& field : node) {
      const auto key = field.first.as<std::string>();
      const auto& value = field.second;
      const bool quoted = value.Tag() == "!";  // a JSON string, even one that reads as a number
      double number = 0.0;
      if (value.IsNull()) {
        record.numbers[key] = std::numeric_limits<double>::quiet_NaN();
      } else if (!value.IsScalar()) {
        continue;
      } else if (!quoted && YAML::convert<double>::decode(value, number)) {
        record.numbers[key] = number;
      } else {
        record.texts[key] = value.Scalar();
      }
    }
    records.push_back(std::move(record));
  }
  return records;
}

}  // namespace ampt::log

// Reads a run's line-oriented output (stdout, metrics.jsonl, summary.json) in whole-process tests:
// the lines holding some text, and one numeric field of a JSON line.
#pragma once

#include <catch2/catch.hpp>

#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace ampt::test {

inline std::vector<std::string> lines_with(const std::string& text, const std::string& needle) {
  std::vector<std::string> found;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.find(needle) != std::string::npos) found.push_back(line);
  }
  return found;
}

inline double json_field(const std::string& json, const std::string& key) {
  std::smatch match;
  const std::regex pattern("\"" + key + "\": ([-0-9.e+]+)");
  if (!std::regex_search(json, match, pattern)) FAIL("no numeric field " << key << " in " << json);
  return std::stod(match[1]);
}

// Every optimizer step's training loss in the metrics.jsonl text of a run (validation lines left
// out), in order.
inline std::vector<double> step_losses(const std::string& metrics) {
  std::vector<double> out;
  for (const auto& line : lines_with(metrics, "\"loss\"")) {
    if (line.find("\"val_loss\"") == std::string::npos) out.push_back(json_field(line, "loss"));
  }
  return out;
}

}  // namespace ampt::test

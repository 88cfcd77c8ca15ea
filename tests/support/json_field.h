// Reads one numeric field from a JSON line (metrics.jsonl, summary.json) in whole-process tests.
#pragma once

#include <catch2/catch.hpp>

#include <regex>
#include <string>

namespace ampt::test {

inline double json_field(const std::string& json, const std::string& key) {
  std::smatch match;
  const std::regex pattern("\"" + key + "\": ([-0-9.e+]+)");
  if (!std::regex_search(json, match, pattern)) FAIL("no numeric field " << key << " in " << json);
  return std::stod(match[1]);
}

}  // namespace ampt::test
